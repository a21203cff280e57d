"""Generic code of every node container, whatever its system.

  init           the container entrypoint: per-cluster and per-host settings, then services
  daemon         what every daemon shares: a JSON-over-HTTP handler and an atomic save
  processes      is a process alive, and is it still the one we started
  quota          `myquota`
  systemctl      `systemctl status` for the services a role describes
  slurm_jobinfo  what Slurm gave a job, and what every system's prolog/epilog shares
  slurm_text     the one reader of Slurm's text (GRES, scontrol records, squeue/sacct rows)
  login          a command in a user's login shell (`runuser -l`), argv or one line
A system's own daemons and hooks live in its room (graphcore/, sambanova/, cerebras/).
"""
