"""Search tree dock: tidy layout, batched drawing, node actions."""
