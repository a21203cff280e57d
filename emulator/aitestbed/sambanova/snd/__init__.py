"""The snd daemon that owns a SambaNova node's RDUs and tiles: state, server (wire), client."""
