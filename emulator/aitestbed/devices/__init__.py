"""Device models shared by the vendor facades: what the hardware has and allows.

  base    chips, systems, allocations and the errors every vendor's stack raises
  ipu     Graphcore Bow IPU and Bow-Pod64; allocation from the job's V-IPU partition
  rdu     SambaNova SN10-8 and SN30-8: RDUs and tiles held through Slurm's rdu GRES
  clock   device time and how wall time follows it (AITESTBED_TIME_SCALE)
  timing  compile times and throughput calibrated to the documented runs
The CS-2 (Cerebras) model will take the same shape: a ChipSpec, a SystemSpec,
an allocation read from the scheduler, and the checks.
"""
