"""Log dock."""
