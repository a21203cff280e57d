"""The V-IPU server as a user attacks it from a login node (security review B12, B13):
only Slurm's prolog and epilog change partitions, and a job's partition is read by its
owner only."""

import json
import shlex
import subprocess

import pytest
import yaml
from aitestbed.host.driver import wait_for

from .conftest import AITESTBED

pytestmark = pytest.mark.presubmit

CALL = """python3 - <<'EOF'
import json, urllib.request, urllib.error
request = urllib.request.Request("http://vipu:8090/api/v1/partitions/{name}", method="{method}",
    data={body!r}, headers={{"Content-Type": "application/json"}})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as err:
    print(err.code, json.loads(err.read())["error"])
EOF"""


def call(cluster, method: str, name: str, body: bytes | None = None) -> str:
    rc, out = cluster.run("gc-login-01", CALL.format(method=method, name=name, body=body))
    assert rc == 0, out
    return out.strip()


def test_a_user_can_neither_remove_a_job_s_partition_nor_take_the_pod(cluster):
    rc, out = cluster.run("gc-login-01", "sbatch --parsable --ipus=1 --wrap 'sleep 120'")
    assert rc == 0, out
    job = out.strip().splitlines()[-1]
    try:
        wait_for(lambda: cluster.run("gc-login-01", f"squeue -h -j {job} -o %T")[1].strip()
                 == "RUNNING", 60, 1, f"job {job} to run")
        denied = "403 only Slurm's prolog and epilog"
        assert call(cluster, "DELETE", f"slurm_{job}").startswith(denied)
        hog = json.dumps({"hosts": {"gc-poplar-01": 16, "gc-poplar-02": 16},
                          "job_id": ""}).encode()
        assert call(cluster, "PUT", "hog", hog).startswith(denied)
        rc, out = cluster.run("gc-login-01", f"squeue -h -j {job} -o %T")
        assert out.strip() == "RUNNING"
        partitions = cluster.host("gc-slurmctld").check_output(
            "python3 -c 'import urllib.request as u; "
            "print(u.urlopen(\"http://localhost:8090/api/v1/partitions\").read().decode())'")
        names = [p["name"] for p in json.loads(partitions)["partitions"]]
        assert f"slurm_{job}" in names and "hog" not in names
    finally:
        cluster.run("gc-login-01", f"scancel {job}")
    token = cluster.host("gc-slurmctld").file("/var/lib/vipu/admin.token")
    assert (token.user, token.group, token.mode) == ("root", "slurm", 0o640)


# A second Graphcore user, onboarded as staff do, who goes after the practice user's job.
INTRUDER = "trudy"
INTRUDER_PEOPLE = {"accounts": [{"name": INTRUDER, "uid": 21102, "systems": ["graphcore"]}],
                   "projects": []}
# `python3 ~/vipu_read.py HOW PATH`: GET /api/v1/PATH from the V-IPU server; HOW is `munge`
# (a fresh credential of the caller, as the SDK's tools send), `replay` (the same credential
# twice; the second answer is printed), `none`, or an Authorization header's value.
VIPU_READ = """import json, subprocess, sys, urllib.error, urllib.request
how, path = sys.argv[1:3]
headers = {}
if how in ("munge", "replay"):
    credential = subprocess.run(["munge", "-n"], capture_output=True, text=True,
                                check=True).stdout.strip()
    headers["Authorization"] = "MUNGE " + credential
elif how != "none":
    headers["Authorization"] = how
for attempt in range(2 if how == "replay" else 1):
    request = urllib.request.Request("http://vipu:8090/api/v1/" + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = {"status": response.status, "body": json.load(response)}
    except urllib.error.HTTPError as err:
        answer = {"status": err.code, "body": json.load(err)}
print(json.dumps(answer))
"""
INSTALL_VIPU_READ = f"cat > ~/vipu_read.py <<'EOF'\n{VIPU_READ}EOF"


def test_another_user_cannot_read_a_job_s_partition_which_its_owner_reads(cluster, tmp_path):
    people = tmp_path / "people.yml"
    people.write_text(yaml.safe_dump(INTRUDER_PEOPLE))
    onboard = subprocess.run([*AITESTBED, "--name", cluster.name, "playbook", "onboard-user",
                              "-e", f"@{people}", "-e", f"user={INTRUDER}"],
                             capture_output=True, text=True, timeout=900, check=False)
    assert onboard.returncode == 0, onboard.stdout[-3000:]
    login = cluster.log_in("gc-login-01", INTRUDER)
    assert login.returncode == 0, login.stderr

    def intruder(command: str) -> tuple[int, str]:
        result = cluster.ssh("gc-login-01", command, "-l", INTRUDER)
        return result.returncode, result.stdout + result.stderr

    def read(run, how: str, path: str) -> dict:
        rc, out = run(f"python3 ~/vipu_read.py {shlex.quote(how)} {shlex.quote(path)}")
        assert rc == 0, out
        return json.loads(out.strip().splitlines()[-1])

    def owner(command: str) -> tuple[int, str]:
        return cluster.run("gc-login-01", command)

    for run in (owner, intruder):
        rc, out = run(INSTALL_VIPU_READ)
        assert rc == 0, out
    # the owner's job reads its own partition from inside, as the SDK's tools do
    rc, out = owner("sbatch --parsable --ipus=1 -o ~/vipu-own-%j.json --wrap "
                    "'python3 ~/vipu_read.py munge partitions/$IPUOF_VIPU_API_PARTITION_ID; "
                    "sleep 120'")
    assert rc == 0, out
    job = out.strip().splitlines()[-1]
    name = f"slurm_{job}"
    try:
        wait_for(lambda: owner(f"test -s ~/vipu-own-{job}.json")[0] == 0, 60, 1,
                 f"job {job} to read its partition")
        rc, out = owner(f"cat ~/vipu-own-{job}.json")
        assert out.strip().splitlines()[-1].startswith('{"status": 200'), out
        own = json.loads(out.strip().splitlines()[-1])
        assert (own["body"]["name"], own["body"]["user"]) == (name, cluster.user)
        listed = read(owner, "munge", "partitions")  # outside the job: still the owner's
        assert name in [p["name"] for p in listed["body"]["partitions"]], listed

        stolen = read(intruder, "munge", f"partitions/{name}")
        assert stolen == {"status": 403, "body": {"error": (
            f"partition {name} belongs to another user's job: a V-IPU partition is read by "
            "the owner of its job only")}}
        listed = read(intruder, "munge", "partitions")
        assert listed["status"] == 200 and name not in [
            p["name"] for p in listed["body"]["partitions"]], listed
        for how, message in (
                ("none", "this request carries no MUNGE credential"),
                ("MUNGE MUNGE:" + "A" * 64 + ":", "the MUNGE credential was refused"),
                ("replay", "the MUNGE credential was refused"),
                ("Bearer " + "0" * 64, "the token given is not the V-IPU server's")):
            for path in (f"partitions/{name}", "partitions"):
                refused = read(intruder, how, path)
                assert refused["status"] == 401 and message in refused["body"]["error"], (
                    how, refused)
        rc, out = owner(f"squeue -h -j {job} -o %T")
        assert out.strip() == "RUNNING"  # the owner's job is untouched
    finally:
        owner(f"scancel {job}")
        cluster.log_out("gc-login-01", INTRUDER)
