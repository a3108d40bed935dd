"""Targets dock."""
