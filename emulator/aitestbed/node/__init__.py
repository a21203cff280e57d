"""Code that runs inside the node containers."""
