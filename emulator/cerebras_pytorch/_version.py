"""The Cerebras software release this cerebras_pytorch belongs to."""

__version__ = "2.1.1"
