"""`up` from a registry on a fresh engine (printed, gating nothing):
`python tests/bench/bench_registry_up.py` (root: it runs a dockerd of its own).

The first-contact issue's targets: with a registry holding the images, `up` of the full
default profile on a fresh engine <= 3 min; a mini one-system cluster <= 90 s.

  1. Debian's docker-registry on 127.0.0.1 (its storage in a temporary directory);
     `aitestbed images push` of every image the scenarios need (built first if missing);
  2. for each scenario, `aitestbed images pull` (what `up` pulls with AITESTBED_REGISTRY
     set) into a cold engine (bench_images.ColdEngine: its own dockerd, data root and
     socket, no image, no layer), as a fresh machine with a registry has;
  3. then `up` of the scenario on the machine's engine, where the images are present.

The figure is (2) + (3). A cluster cannot run on the cold engine itself: it runs without
iptables (a second dockerd managing the host's iptables would fight the first), and
without them Docker's embedded DNS does not answer on its networks, so the nodes cannot
find each other. BENCH_SCENARIOS="mini:graphcore alcf:" picks scenarios (PROFILE:SYSTEMS,
empty: all).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_images import REGISTRY, ColdEngine, local_registry  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
AITESTBED = [sys.executable, "-m", "aitestbed.cli"]
SCENARIOS = os.environ.get("BENCH_SCENARIOS", "mini:graphcore alcf:").split()


def aitestbed(*args: str, env: dict | None = None, timeout: float = 3600
              ) -> subprocess.CompletedProcess:
    return subprocess.run([*AITESTBED, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def scenario_args(scenario: str) -> list[str]:
    profile, _, systems = scenario.partition(":")
    return ["--profile", profile, *(["--systems", systems] if systems else [])]


def main() -> None:
    if os.geteuid() != 0:
        print("bench: up from a registry skipped: run as root (it starts a dockerd of its own)")
        return
    if not Path(REGISTRY).exists():
        print("bench: up from a registry skipped: Debian's docker-registry is not installed "
              "(apt-get install docker-registry)")
        return
    work = Path(tempfile.mkdtemp(prefix="bench-regup-", dir=os.environ.get("BENCH_DIR")))
    figures: dict[str, str] = {}
    try:
        with local_registry(work) as where:
            _scenarios(work, where, figures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\naitestbed: up from a registry on a fresh engine ({os.cpu_count()} cores)")
    for label, value in figures.items():
        print(f"  {label:<56} {value}")


def _scenarios(work: Path, where: str, figures: dict[str, str]) -> None:
    """Push every scenario's images, then each: pull into a cold engine, up, destroy."""
    for scenario in SCENARIOS:
        started = time.monotonic()
        pushed = aitestbed("images", "push", "--registry", where, *scenario_args(scenario))
        if pushed.returncode:
            sys.exit(f"bench: push failed:\n{pushed.stderr[-2000:]}")
        figures[f"push {scenario} (s)"] = f"{time.monotonic() - started:.0f}"
    for scenario in SCENARIOS:
        name = f"benchreg-{uuid.uuid4().hex[:6]}"
        engine = ColdEngine(work / f"cold-{name}")
        with engine:
            env = {**os.environ, "DOCKER_HOST": engine.socket}
            started = time.monotonic()
            pulled = aitestbed("images", "pull", "--registry", where,
                               *scenario_args(scenario), env=env)
            pull = time.monotonic() - started
        if pulled.returncode:
            sys.exit(f"bench: pull failed:\n{pulled.stderr[-2000:]}")
        env = {**os.environ, "AITESTBED_USER": "learner",
               "XDG_STATE_HOME": str(work / "state")}
        started = time.monotonic()
        up = aitestbed("--name", name, "up", *scenario_args(scenario), env=env)
        took = time.monotonic() - started
        target = 90 if scenario.partition(":")[2] else 180
        figures[f"pull {scenario} into a cold engine (s)"] = f"{pull:.0f}"
        if up.returncode:
            figures[f"up {scenario}, images present"] = (
                f"FAILED after {took:.0f} s: {up.stderr.strip().splitlines()[-1:]}")
        else:
            figures[f"up {scenario}, images present (s)"] = f"{took:.0f}"
            figures[f"from the registry on a fresh engine, {scenario} (s)"] = (
                f"{pull + took:.0f}   (target <= {target})")
        aitestbed("--name", name, "destroy", env=env)
        print(*(f"  {k}: {v}" for k, v in figures.items()), sep="\n", flush=True)


if __name__ == "__main__":
    main()
