"""Cerebras figures (printed, gating nothing): `make bench`.

On a mini cluster of its own (Cerebras only), as a user on cer-login-01:
  - the guide's fc_mnist 2.1.1 run (venv, clone, `python run.py CSX ...`) at the
    default time scale: wall time of the run (target <= 90 s);
  - a wsjob's way to RUNNING: submission to RUNNING with both systems free, as
    the client sees it (target <= 2 s), over 10 compile jobs;
  - `csctl get jobs -a` with 100 jobs in the API (target p50 <= 0.3 s; the real
    one "can take over a minute").
"""

from __future__ import annotations

import json
import re
import statistics
import uuid

from aitestbed.cerebras import guide as cs_guide
from aitestbed.host.driver import Driver
from aitestbed.node import guide
from benchlib import cli, step

# The guide's set-up (not timed: quiet, without the steps the run does not need).
SETUP = guide.script("set -e", cs_guide.CS_SETUP, f"cd {cs_guide.FC_MNIST}",
                     cs_guide.CS_SET_DATA_DIR, quiet=True,
                     skip=(guide.UPGRADE_PIP, "git tag", cs_guide.CS_REQUIREMENTS))
RUN = guide.script(
    "set -e", cs_guide.CS_ENTER, "export MODEL_DIR=model_dir", "start=$(date +%s.%N)",
    f"{cs_guide.cs_run('pt_smoketest')} > run.log 2>&1",
    'echo "WALL $(python3 -c "import time; print(time.time() - $start)")"',
    "grep -E 'GlobalRate|Processed' run.log | tail -2")
# Submit compile jobs as the client does and time each until the API says RUNNING,
# then cancel it (no client will connect to its workload).
TO_RUNNING = """
import json, os, pwd, time
from aitestbed.cerebras import config, kubeapi, wsjob
usernode = config.load_usernode_config()
api = kubeapi.KubeApi(config.user_credentials(usernode))
user = pwd.getpwuid(os.getuid())
times = []
for i in range(10):
    job = wsjob.build("compile", {"release": "2.1.1", "job_labels": {"name": "bench"}},
                      user.pw_name, user.pw_uid, user.pw_gid)
    start = time.monotonic()
    name = api.create_job(job)["metadata"]["name"]
    while (api.get_job(name).get("status") or {}).get("phase") != "RUNNING":
        time.sleep(0.01)
    times.append(time.monotonic() - start)
    api.patch_job(name, {"spec": {"cancelRequested": True}})
    while (api.get_job(name).get("status") or {}).get("phase") not in wsjob.FINISHED:
        time.sleep(0.05)
print(json.dumps(times))
"""
FILL = """
import os, pwd
from aitestbed.cerebras import config, kubeapi, wsjob
api = kubeapi.KubeApi(config.user_credentials(config.load_usernode_config()))
user = pwd.getpwuid(os.getuid())
count = len(api.list_jobs()["items"])
for i in range(max(0, 100 - count)):
    api.create_job(wsjob.build("compile", {"release": "none", "job_labels": {"n": str(i)}},
                               user.pw_name, user.pw_uid, user.pw_gid))
print(len(api.list_jobs()["items"]))
"""
CSCTL = """TIMEFORMAT=%R
for i in $(seq 20); do { time csctl get jobs -a > /dev/null; } 2>&1; done
"""


def on_login(name: str, script: str, shell: str = "bash") -> str:
    """script on cer-login-01, given to the shell on its standard input."""
    return step(Driver(name).ssh("cer-login-01", f"{shell} -s", input=script), script).stdout


def main() -> None:
    name = f"bench-cer-{uuid.uuid4().hex[:6]}"
    cli(name, "up", "--profile", "mini", "--systems", "cerebras")
    cli(name, "login")  # the passcode once per login node
    try:
        on_login(name, SETUP)
        run = on_login(name, RUN)
        to_running = sorted(json.loads(on_login(name, TO_RUNNING, "python3")))
        jobs = on_login(name, FILL, "python3").strip()
        csctl = sorted(float(x) for x in on_login(name, CSCTL).split())
    finally:
        cli(name, "destroy")
    wall = float(re.search(r"WALL ([\d.]+)", run).group(1))
    print("Cerebras (mini cluster, cer-login-01)")
    print(f"  fc_mnist 2.1.1 run.py CSX, default time scale: wall {wall:.1f} s (target <= 90 s)")
    for line in run.splitlines()[1:]:
        print(f"    {line.strip()}")
    print(f"  submission to RUNNING: median {statistics.median(to_running):.2f} s, "
          f"max {to_running[-1]:.2f} s (n={len(to_running)}, target <= 2 s)")
    print(f"  csctl get jobs -a with {jobs} jobs: p50 {statistics.median(csctl):.3f} s, "
          f"max {csctl[-1]:.3f} s (n={len(csctl)}, target p50 <= 0.3 s)")


if __name__ == "__main__":
    main()
