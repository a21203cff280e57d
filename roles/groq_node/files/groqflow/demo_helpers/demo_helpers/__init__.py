"""Helpers of the GroqFlow proof points: the CLI, data sets, models and the result table."""
