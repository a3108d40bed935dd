"""Code and diff dock."""
