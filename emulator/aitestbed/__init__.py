"""aitestbed: the ALCF AI Testbed emulated as code on one machine."""

__version__ = "0.1.0"
