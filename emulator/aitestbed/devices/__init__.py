"""The kernel every system's model and every vendor facade builds on (no system of its own).

  base    the shape every accelerator model shares: ChipSpec, SystemSpec, Allocation,
          and the errors every vendor's stack raises (DeviceError and its kinds)
  clock   device time and how wall time follows it (AITESTBED_TIME_SCALE)
  host    what a facade does to its host process: start(Runtime), FacadeRuntime
          (torch threads, OpenBLAS), progress bars counting device time
Each system's model, with its timing, lives in its room:
  graphcore/ipu.py, graphcore/timing.py   Bow IPU and Bow-Pod64 (allocation: V-IPU)
  sambanova/rdu.py, sambanova/timing.py   DataScale SN10-8 and SN30-8 (RDUs and tiles: snd)
  cerebras/cs2.py,  cerebras/timing.py    CS-2 and its Wafer-Scale Cluster
The kernel imports nothing from the rooms, the host or the facades.
"""
