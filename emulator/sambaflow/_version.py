# The SambaFlow release the ALCF guide shows (`sambaflow.__version__` -> '1.11.5').
__version__ = "1.11.5"
