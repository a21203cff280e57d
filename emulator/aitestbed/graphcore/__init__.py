"""Graphcore's command-line tools (popc, gc-info, gc-monitor, poprun) for the emulated Bow-Pod64.

Each tool is a module run as `python3 -m aitestbed.graphcore.<tool>`; the devices
they show are the partitions the V-IPU server (aitestbed.vipu) holds.
"""
