"""The trainer: its YAML (config.py) and the flows the appliance runs (flow.py)."""
