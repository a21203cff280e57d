"""The Cerebras Model Zoo, Release 2.10.0 (aitestbed emulator edition)."""

__version__ = "2.10.0"
