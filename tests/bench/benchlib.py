"""What every bench does, through aitestbed.host.driver: run the CLI for its own cluster
and the practice user's steps there; a failure ends the bench with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from aitestbed.host import driver


def cli(name: str, *args: str, env: dict | None = None) -> float:
    """`aitestbed --name NAME ARGS`; its wall time in seconds."""
    started = time.monotonic()
    result = driver.aitestbed(name, *args, env={**os.environ, **(env or {})})
    if result.returncode:
        sys.exit(f"bench: aitestbed {' '.join(args)} failed:\n{result.stdout[-2000:]}"
                 f"{result.stderr}")
    return time.monotonic() - started


def destroy(name: str) -> None:
    """Remove the bench's cluster, whatever happened before."""
    driver.aitestbed(name, "destroy")


def step(result: subprocess.CompletedProcess, script: str) -> subprocess.CompletedProcess:
    """A user's step as it ended; a failed one ends the bench."""
    if result.returncode:
        sys.exit(f"bench: step failed:\n{script}\n{result.stdout}{result.stderr}")
    return result
