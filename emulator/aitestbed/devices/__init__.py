"""Device models shared by the vendor facades: what the hardware has and allows.

  base    chips, systems, allocations and the errors every vendor's stack raises
  ipu     Graphcore Bow IPU and Bow-Pod64; allocation from the job's V-IPU partition
  clock   device time and how wall time follows it (AITESTBED_TIME_SCALE)
  timing  compile times and throughput calibrated to the documented runs
RDU (SambaNova) and CS-2 (Cerebras) models take the same shape: a ChipSpec, a
SystemSpec, an allocation read from the scheduler, and the checks.
"""
