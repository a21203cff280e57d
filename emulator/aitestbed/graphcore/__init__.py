"""The Graphcore Bow-Pod64 room: everything of the emulated IPUs in one place.

  ipu          the Bow IPU and Bow-Pod64 model; a job's IPUs from its V-IPU partition
  timing       compile times and throughput calibrated to the documented runs
  vipu/        the V-IPU server: pod (state), server (HTTP wire), client
  slurm_hooks  the Graphcore controller's prolog/epilog: partition slurm_<jobid>
  popc, gc_info, gc_monitor, poprun
               the SDK's command-line tools, each run as `python3 -m aitestbed.graphcore.<tool>`
"""
