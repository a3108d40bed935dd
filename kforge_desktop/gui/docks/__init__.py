"""The panels of the main window, one folder each: widget, item model, actions."""
