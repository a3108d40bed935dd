"""Speedup plot dock."""
