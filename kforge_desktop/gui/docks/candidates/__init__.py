"""Candidates dock: every node of the problem as a sortable table."""
