"""Runs on a Graphcore login node as the practice user; prints JSON figures.

Timed here, next to Slurm, so ssh from the host is not part of any figure.
"""

import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
import urllib.request

VIPU = "http://vipu:8090/api/v1/partitions"


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50": statistics.median(ordered),
            "p90": ordered[int(0.9 * (len(ordered) - 1))], "max": ordered[-1], "n": len(ordered)}


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def srun_latency(count: int) -> dict:
    samples = []
    for _ in range(count):
        started = time.monotonic()
        run("srun", "--ipus=1", "true")
        samples.append(time.monotonic() - started)
    return percentiles(samples)


def job_state(job: str) -> str:
    out = run("scontrol", "show", "job", "-o", job)
    return out.split("JobState=", 1)[1].split()[0]


def sbatch_until_completed(count: int, random_phase: bool) -> dict:
    """slurmctld starts batch jobs on its once-a-second tick: back to back, each
    submission lands just after a tick; with random_phase a random pause (not
    counted) first, as a user's submissions fall at any moment."""
    samples = []
    for _ in range(count):
        if random_phase:
            time.sleep(random.random())
        started = time.monotonic()
        job = run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip()
        while job_state(job) != "COMPLETED":
            time.sleep(0.02)
        samples.append(time.monotonic() - started)
    return percentiles(samples)


def ipus_in_use() -> tuple[int, int]:
    """(IPUs in V-IPU partitions, ipu GRES Slurm has allocated)."""
    credential = run("munge", "-n").strip()  # the server shows a user their own partitions
    request = urllib.request.Request(VIPU, headers={"Authorization": f"MUNGE {credential}"})
    partitions = json.load(urllib.request.urlopen(request))["partitions"]
    nodes = run("scontrol", "show", "node", "-d")
    gres = sum(int(count) for count in re.findall(r"GresUsed=ipu:(\d+)", nodes))
    return sum(len(p["ipus"]) for p in partitions), gres


def drain(jobs: int, seconds: float) -> dict:
    started = time.monotonic()
    ids = [run("sbatch", "--parsable", "--ipus=1", "-o", "/dev/null", "--wrap",
               f"sleep {seconds}").strip() for _ in range(jobs)]
    submitted = time.monotonic() - started
    peak_vipu = peak_gres = 0
    while True:
        vipu, gres = ipus_in_use()
        peak_vipu, peak_gres = max(peak_vipu, vipu), max(peak_gres, gres)
        left = run("squeue", "-h", "-u", os.environ["USER"], "-o", "%i").split()
        if not set(left) & set(ids):
            break
        time.sleep(0.2)
    failed = [j for j in ids if job_state(j) != "COMPLETED"]
    return {"jobs": jobs, "job_seconds": seconds, "submit_s": submitted,
            "drain_s": time.monotonic() - started, "peak_ipus_vipu": peak_vipu,
            "peak_ipus_gres": peak_gres, "not_completed": len(failed)}


if __name__ == "__main__":
    srun_n, sbatch_n, drain_n = (int(a) for a in sys.argv[1:4])
    figures = {"srun_ipus_1_true_s": srun_latency(srun_n),
               "sbatch_wrap_true_until_completed_s": sbatch_until_completed(sbatch_n, True),
               "sbatch_back_to_back_s": sbatch_until_completed(sbatch_n, False),
               "drain_200_one_ipu_jobs": drain(drain_n, 2.0)}
    print(json.dumps(figures))
