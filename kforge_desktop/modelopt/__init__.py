"""modelopt"""
