"""Slurm accounting (issue 21): each Slurm cluster's slurmdbd and MariaDB on its
controller, so users check finished jobs with `sacct` (the accelerators counted as
TRES, gres/ipu and gres/rdu) and `sreport`, as at ALCF."""

from __future__ import annotations

import re
import time

import pytest

pytestmark = pytest.mark.presubmit

GC_LOGIN = "gc-login-01"


def sacct_until(cluster, login: str, job: str, fields: str, done: str = "COMPLETED|FAILED",
                timeout: float = 60) -> str:
    """sacct's line for the job once its end is recorded (slurmctld sends it to slurmdbd;
    for a second or so after a short job ends, Slurm's record still says uid 0)."""
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.ssh(login, f"sacct -n -X -P -j {job} --format=UID,{fields}").stdout
        uid, _, line = out.strip().partition("|")
        if (re.search(done, line) and uid not in ("", "0")) or time.monotonic() > deadline:
            return line
        time.sleep(0.5)


def test_sacct_reports_a_finished_jobs_state_exit_code_and_ipus(cluster):
    ok = cluster.ssh(GC_LOGIN, "cd /tmp && sbatch --parsable --ipus=1 --wrap hostname"
                     ).stdout.strip()
    failed = cluster.ssh(GC_LOGIN, "cd /tmp && sbatch --parsable --wrap 'exit 3'").stdout.strip()
    line = sacct_until(cluster, GC_LOGIN, ok, "JobID,User,Partition,State,ExitCode,AllocTRES")
    job, user, partition, state, exit_code, tres = line.strip().split("|")
    assert (job, user, partition, state, exit_code) == (
        ok, cluster.user, "p64", "COMPLETED", "0:0")
    assert "gres/ipu=1" in tres, line
    line = sacct_until(cluster, GC_LOGIN, failed, "JobID,State,ExitCode")
    assert line.strip() == f"{failed}|FAILED|3:0"
    # The guide's default listing has the header and this user's jobs.
    listing = cluster.ssh(GC_LOGIN, "sacct").stdout
    assert listing.splitlines()[0].split() == ["JobID", "JobName", "Partition", "Account",
                                               "AllocCPUS", "State", "ExitCode"]
    assert ok in listing and failed in listing


def test_sacct_on_sambanova_counts_rdus_and_sreport_answers(cluster):
    job = cluster.ssh("sambanova", "cd /tmp && sbatch --parsable --gres=rdu:1 --wrap true"
                      ).stdout.strip()
    line = sacct_until(cluster, "sambanova", job, "JobID,State,AllocTRES")
    assert line.startswith(f"{job}|COMPLETED|") and "gres/rdu=1" in line, line
    # sreport reads the hourly roll-ups: on a new cluster, the header and no rows yet.
    report = cluster.ssh("sambanova", "sreport cluster utilization -t percent")
    assert report.returncode == 0, report.stderr
    assert "Cluster Utilization" in report.stdout and "Reported" in report.stdout
    clusters = cluster.ssh("sambanova", "sacctmgr -n -P list cluster format=cluster").stdout
    assert clusters.split() == ["sn30"]


def test_a_user_cannot_change_the_accounting_database(cluster):
    """The attacker's moves with sacctmgr: a cluster of their own, deleting the real one,
    making themselves an administrator. slurmdbd knows the caller (MUNGE) and refuses."""
    out = cluster.ssh("sambanova", "; ".join([
        "sacctmgr -i add cluster evil >/dev/null 2>&1; echo add=$?",
        "sacctmgr -i delete cluster sn30 >/dev/null 2>&1; echo delete=$?",
        f"sacctmgr -i add user {cluster.user} account=root adminlevel=Admin >/dev/null 2>&1;"
        " echo admin=$?",
        "sacctmgr -n -P list cluster format=cluster",
        "sacctmgr -n -P list user format=user,adminlevel",
    ])).stdout.split()
    assert out == ["add=1", "delete=1", "admin=1", "sn30", "root|Administrator"], out
