"""SambaNova DataScale nodes: the snd daemon that owns RDUs and tiles, its client, and the
system tools that ask it (snconfig, sntilestat, systemctl status snd)."""
