__version__ = "4.3.1"
