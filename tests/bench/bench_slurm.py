"""Slurm figures (printed, gating nothing): `make bench`.

On a POD64 of its own (profile alcf, system graphcore: gc-poplar-01..04, 64
IPUs): `srun --ipus=1 true` latency, `sbatch --wrap true` until COMPLETED, and
200 queued one-IPU jobs draining, with the peak of IPUs in use (V-IPU
partitions and Slurm's GRES) sampled every 0.2 s. The timing runs on the login
node (tests/bench/slurm_driver.py), so ssh from the host is not counted.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

from aitestbed.host.driver import Driver
from benchlib import cli, step

SRUN_RUNS = int(os.environ.get("BENCH_SRUN_RUNS", "40"))
SBATCH_RUNS = int(os.environ.get("BENCH_SBATCH_RUNS", "20"))
DRAIN_JOBS = int(os.environ.get("BENCH_DRAIN_JOBS", "200"))


def main() -> None:
    name = f"bench-slurm-{uuid.uuid4().hex[:6]}"
    cli(name, "up", "--profile", "alcf", "--systems", "graphcore")
    cli(name, "login")  # the passcode once per login node
    try:
        user = Driver(name)
        upload = "cat > ~/slurm_driver.py"
        step(user.ssh("gc-login-01", upload,
                      input=(Path(__file__).parent / "slurm_driver.py").read_text()), upload)
        out = user.ssh("gc-login-01", f"python3 ~/slurm_driver.py {SRUN_RUNS} {SBATCH_RUNS} "
                                      f"{DRAIN_JOBS}")
        if out.returncode:
            sys.exit(f"bench: the driver failed:\n{out.stderr}")
        figures = json.loads(out.stdout)
    finally:
        cli(name, "destroy")
    srun, sbatch, drain = (figures["srun_ipus_1_true_s"],
                           figures["sbatch_wrap_true_until_completed_s"],
                           figures["drain_200_one_ipu_jobs"])
    print(f"srun --ipus=1 true:                p50 {srun['p50']:.3f} s  p90 {srun['p90']:.3f} s"
          f"  max {srun['max']:.3f} s  (n={srun['n']}; target p50 <= 0.2 s)")
    print(f"sbatch --wrap true to COMPLETED:   p50 {sbatch['p50']:.3f} s  p90 {sbatch['p90']:.3f}"
          f" s  max {sbatch['max']:.3f} s  (n={sbatch['n']}, submitted at random moments; "
          "target p50 <= 1.0 s)")
    locked = figures["sbatch_back_to_back_s"]
    print(f"  ... back to back (in step with slurmctld's 1 s tick): p50 {locked['p50']:.3f} s"
          f"  max {locked['max']:.3f} s")
    print(f"{drain['jobs']} one-IPU jobs of {drain['job_seconds']:.0f} s: submitted in "
          f"{drain['submit_s']:.1f} s, drained in {drain['drain_s']:.1f} s; peak IPUs in use "
          f"{drain['peak_ipus_vipu']} (V-IPU) / {drain['peak_ipus_gres']} (GRES), limit 64; "
          f"{drain['not_completed']} not COMPLETED")


if __name__ == "__main__":
    main()
