"""pyslurm-compatible layer (in progress)."""
