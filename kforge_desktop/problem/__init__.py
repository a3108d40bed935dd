"""problem"""
