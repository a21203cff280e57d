"""The emulated Graphcore V-IPU server: the one owner of a POD's IPUs and partitions."""
