"""Datasets the emulated testbed keeps offline under /software/<vendor>/dataset."""
