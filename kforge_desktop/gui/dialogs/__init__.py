"""Dialogs of the main window (LLM choice, hand edits)."""
