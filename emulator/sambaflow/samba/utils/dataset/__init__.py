"""Datasets the example apps use (MNIST)."""
