"""Our side of Slurm: job details from its commands, and the prolog/epilog hooks."""
