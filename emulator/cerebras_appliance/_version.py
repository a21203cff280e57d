"""The Cerebras software release this cerebras_appliance belongs to."""

__version__ = "2.1.1"
