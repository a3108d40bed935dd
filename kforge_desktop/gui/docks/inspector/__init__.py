"""Inspector dock."""
