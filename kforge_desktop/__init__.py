"""Kernel Forge Desktop: local-LLM kernel search for PyTorch models."""
__version__ = "0.1.0"
