"""The V-IPU server as a user attacks it from a login node (security review B12, B13):
only Slurm's prolog and epilog change partitions."""

import json

from aitestbed.host.driver import wait_for

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
