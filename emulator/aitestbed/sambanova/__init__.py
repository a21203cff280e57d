"""The SambaNova DataScale room: everything of the emulated RDUs in one place.

  rdu          the SN10-8 and SN30-8 model: RDUs and tiles held through Slurm's rdu GRES
  timing       compile times and throughput calibrated to the documented runs
  snd/         the node daemon that owns RDUs and tiles: state, server (wire), client
  slurm_hooks  the nodes' prolog/epilog: a job's RDUs from snd
  snconfig, sntilestat
               the system tools that ask snd (and `systemctl status snd`, in node/)
"""
