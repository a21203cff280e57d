"""An ordinary Cerebras user's attacks on the appliance, as the security review made them
(B20, B21, B11, B23): each must be refused, and the guide's run must still work.

`mallory` is onboarded with the onboard-user playbook, logs in on cer-login-01 with her
passcode and uses her own client certificate (tests/cluster/files/wsattack.py). The
owner whose work she goes after is the practice user, running the guide's fc_mnist.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from aitestbed.host.driver import wait_for

from .conftest import AITESTBED
from .test_cerebras import (
    FC_MNIST,
    LOGIN,
    MGMT,
    SETUP_2_1_1,
    csctl_jobs,
    run_log,
    start_run,
)

pytestmark = pytest.mark.presubmit

ATTACKER = "mallory"
PEOPLE = {"accounts": [{"name": ATTACKER, "uid": 21101, "systems": ["cerebras"]}],
          "projects": []}
SCRIPT = Path(__file__).parent / "files" / "wsattack.py"
CANARY = "/root/wsjob-canary.txt"
# Where compile workloads run: the first system's host, not the management node (D01).
COMPILE_NODE = "cer-cs2-01"
ADMIN_KEY = "/etc/aitestbed/node/kubernetes/admin.key"
MUNGE_KEY = "/etc/aitestbed/cluster/munge.key"
WORKDIRS = "/n1/wsjob/workdir/job-operator"
FINISHED = ("SUCCEEDED", "FAILED", "CANCELLED")

# User code the workload imports (as the service user, in its work dir): it tries to
# swap the files the root agent reads back for links to root's secrets (B21 from inside).
EVIL_MODULE = f"""
import os
HERE = os.path.dirname(os.getcwd())
for name, target in (("result.json", "{ADMIN_KEY}"), ("workload.log", "{MUNGE_KEY}"),
                     ("request.json", "{CANARY}")):
    path = os.path.join(HERE, name)
    for how in ("symlink", "hardlink"):
        try:
            if how == "symlink":
                os.symlink(target, "swap")
                os.replace("swap", path)
            else:
                os.link(target, path + ".new")
                os.replace(path + ".new", path)
            print("SWAP", name, how, "done", flush=True)
        except OSError as err:
            print("SWAP", name, how, "refused", type(err).__name__, flush=True)
        finally:
            if os.path.lexists("swap"):
                os.remove("swap")


def flow(params, **functions):
    return None
"""


def as_attacker(cluster, command: str, timeout: float = 120) -> tuple[int, str]:
    """A command in mallory's own ssh session on cer-login-01."""
    result = cluster.ssh(LOGIN, command, "-l", ATTACKER, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def attack(cluster, *args: str, timeout: float = 120) -> dict:
    rc, out = as_attacker(cluster, "python3 ~/wsattack.py " + " ".join(map(shlex.quote, args)),
                          timeout=timeout)
    assert rc == 0, out
    return json.loads(out.strip().splitlines()[-1])


def on_mgmt(cluster, command: str) -> str:
    return cluster.host(MGMT).check_output(command)


@pytest.fixture(scope="module")
def attacker(cluster, tmp_path_factory):
    people = tmp_path_factory.mktemp("people") / "people.yml"
    people.write_text(yaml.safe_dump(PEOPLE))
    onboard = subprocess.run([*AITESTBED, "--name", cluster.name, "playbook", "onboard-user",
                              "-e", f"@{people}", "-e", f"user={ATTACKER}"],
                             capture_output=True, text=True, timeout=900, check=False)
    assert onboard.returncode == 0, onboard.stdout[-3000:]
    login = cluster.log_in(LOGIN, ATTACKER)
    assert login.returncode == 0, login.stderr
    script = base64.b64encode(SCRIPT.read_bytes()).decode()
    rc, out = as_attacker(cluster, f"echo {script} | base64 -d > ~/wsattack.py && "
                                   "chmod a+x ~ && csctl get jobs > /dev/null")
    assert rc == 0, out
    try:
        yield ATTACKER
    finally:
        cluster.log_out(LOGIN, ATTACKER)


@pytest.fixture(scope="module")
def canary(cluster):
    """A root-only file on the management node and on the node compile workloads run on."""
    for node in (MGMT, COMPILE_NODE):
        cluster.host(node).check_output(f"echo ORIGINAL-CANARY > {CANARY} && chmod 600 {CANARY}")
    return CANARY


def canaries(cluster) -> set[str]:
    return {cluster.host(node).check_output(f"cat {CANARY}") for node in (MGMT, COMPILE_NODE)}


@pytest.fixture(scope="module")
def secrets_sha256(cluster) -> dict[str, str]:
    """sha256 of the appliance's secrets the review leaked (the ones present here)."""
    out = cluster.host(MGMT).run(f"sha256sum {ADMIN_KEY} {MUNGE_KEY}").stdout
    found = {line.split()[1]: line.split()[0] for line in out.splitlines()}
    assert ADMIN_KEY in found, out
    return found


def exported(user_run, name: str) -> tuple[str, dict[str, str], int]:
    """csctl log-export as a user: its output, the sha256 of each file in the tarball, and
    how many lines of them say PRIVATE KEY."""
    where = f"/tmp/export-{name}"
    rc, out = user_run(f"rm -rf {where} && csctl log-export {name} -p {where}")
    assert rc == 0, out
    rc, listing = user_run(f"cd {where} && tar xzf {name}.tar.gz && "
                           f"find {name} -type f -exec sha256sum {{}} + && "
                           f"echo keys=$(cat {name}/* | grep -c 'PRIVATE KEY')")
    assert rc == 0, listing
    sums = {line.split()[1].split("/", 1)[1]: line.split()[0]
            for line in listing.splitlines() if len(line.split()) == 2}
    keys = int(listing.strip().splitlines()[-1].removeprefix("keys="))
    return out + listing, sums, keys


def file_of_export(user_run, name: str, file: str) -> str:
    return user_run(f"cat /tmp/export-{name}/{name}/{file}")[1]


def compile_her_module(cluster, package: str, source: str) -> str:
    """mallory's module `<package>mod` in ~/<package>pkg, imported by a compile-only job of
    hers; the job's name once it has finished."""
    module = base64.b64encode(source.encode()).decode()
    rc, out = as_attacker(cluster, f"mkdir -p ~/{package}pkg && chmod a+x ~ && "
                                   f"chmod a+rx ~/{package}pkg && echo {module} | base64 -d > "
                                   f"~/{package}pkg/{package}mod.py && "
                                   f"chmod a+r ~/{package}pkg/{package}mod.py")
    assert rc == 0, out
    name = f"wsjob-probe{package}{uuid.uuid4().hex[:8]}"
    request = json.dumps({
        "release": "2.1.1", "num_csx": 1, "compile_dir": ATTACKER,
        "python_paths": [f"/home/{ATTACKER}/{package}pkg"], "mount_dirs": [f"/home/{ATTACKER}"],
        "program": {"flow": f"{package}mod:flow", "functions": {"model_fn": f"{package}mod:flow"},
                    "params": {}, "compile_only": True, "validate_only": False}})
    followed = attack(cluster, "submit", name, request, timeout=300)
    assert followed["phase"] in FINISHED, followed
    return name


# B20 -----------------------------------------------------------------------------------
def test_b20_a_job_with_a_workdir_of_her_choosing_is_refused(cluster, attacker, canary):
    rc, out = as_attacker(cluster, f"mkdir -p ~/evil && ln -sfn {CANARY} ~/evil/request.json "
                                   f"&& ln -sfn {ADMIN_KEY} ~/evil/result.json "
                                   f"&& ln -sfn {MUNGE_KEY} ~/evil/workload.log")
    assert rc == 0, out
    tag = uuid.uuid4().hex[:8]
    for name, workdir in ((f"wsjob-probeattack1{tag}", f"/home/{ATTACKER}/evil"),
                          (f"wsjob-probeattack1b{tag}", f"/home/{cluster.user}"),
                          (f"wsjob-probeattack1c{tag}",
                           f"{WORKDIRS}/wsjob-probeattack1c{tag}/../../../..")):
        result = attack(cluster, "create", name, workdir)
        assert result["created"] is False and result["status"] == 403, result
        assert f"spec.workdir must be {WORKDIRS}/{name}" in result["message"]
    assert canaries(cluster) == {"ORIGINAL-CANARY"}
    assert cluster.host(LOGIN).file(f"/home/{cluster.user}").user == cluster.user


def test_b20_b21_the_agent_never_uses_spec_workdir(cluster, attacker, canary, secrets_sha256):
    """Staff (not bound by the admission policy) let such a job through: the agent runs it in
    the work dir it derives from the name; the links are neither written nor read."""
    name, token = f"wsjob-probeattack2{uuid.uuid4().hex[:8]}", "a-token-mallory-knows"
    manifest = json.dumps({
        "apiVersion": "jobs.cerebras.com/v1", "kind": "WSJob",
        "metadata": {"name": name, "namespace": "job-operator"},
        "spec": {"user": {"username": ATTACKER}, "jobType": "compile", "numWafers": 1,
                 "release": "2.1.1", "workdir": f"/home/{ATTACKER}/evil",
                 "request": json.dumps({"written-by": ATTACKER, "via": "wsjob agent as root"}),
                 "ingressTokenSha256": hashlib.sha256(token.encode()).hexdigest()}})
    on_mgmt(cluster, f"echo {shlex.quote(manifest)} | kubectl apply -f -")
    try:
        followed = attack(cluster, "follow", name, token, timeout=300)
        assert followed["phase"] in FINISHED, followed
        assert canaries(cluster) == {"ORIGINAL-CANARY"}
        evil = cluster.host(LOGIN).file(f"/home/{ATTACKER}/evil")
        assert evil.user == ATTACKER  # not chowned to the service user
        assert cluster.host(LOGIN).file(f"/home/{ATTACKER}/evil/request.json").is_symlink
        ran = cluster.host(MGMT).file(f"{WORKDIRS}/{name}")
        assert (ran.user, ran.mode) == ("root", 0o755)
        assert cluster.host(MGMT).file(f"{WORKDIRS}/{name}/request.json").content_string \
            .startswith('{"written-by"')
        out, sums, keys = exported(lambda c: as_attacker(cluster, c), name)
        assert set(sums) >= {"workload.log", "request.json", "result.json"}, out
        assert not set(sums.values()) & set(secrets_sha256.values()), out
        assert keys == 0, out
    finally:
        on_mgmt(cluster, f"kubectl delete wsjob -n job-operator {name} --ignore-not-found")


def test_b21_the_workload_cannot_swap_what_the_agent_reads_for_links(cluster, attacker, canary,
                                                                   secrets_sha256):
    """mallory's own code, run by her job as herself, plants links in place of
    result.json, workload.log and request.json: refused, and nothing secret is exported."""
    name = compile_her_module(cluster, "evil", EVIL_MODULE)
    assert canaries(cluster) == {"ORIGINAL-CANARY"}
    out, sums, keys = exported(lambda c: as_attacker(cluster, c), name)
    log = file_of_export(lambda c: as_attacker(cluster, c), name, "workload.log")
    swaps = [line for line in log.splitlines() if line.startswith("SWAP ")]
    assert len(swaps) == 6, log  # her code ran...
    assert all(" refused " in line for line in swaps), swaps  # ...and every swap failed
    assert not set(sums.values()) & set(secrets_sha256.values()), out
    assert keys == 0, out


# The owner's run, with mallory at its ingress (B23), and its logs (B11) ----------------
@pytest.fixture(scope="module")
def owner_release(cluster):
    rc, _ = cluster.run(LOGIN, "test -x ~/R_2.1.1/venv_cerebras_pt/bin/python && "
                               f"test -f {FC_MNIST}/run.py")
    if rc:
        rc, out = cluster.run(LOGIN, SETUP_2_1_1, timeout=300)
        assert rc == 0, out
    rc, out = cluster.run(LOGIN, "chmod a+xr ~/ ~/R_2.1.1/")  # a node start may reset it
    assert rc == 0, out


@pytest.fixture(scope="module")
def sniffed_run(cluster, attacker, owner_release):
    """The guide's fc_mnist as the owner; meanwhile mallory connects to its ingress as the
    review's sniff.py did (first RUNNING job, as fast as she can, three ways)."""
    before = {j["metadata"]["name"] for j in csctl_jobs(cluster, "-l", "name=victim")}
    start_run(cluster, "victim", scale=0.3)
    sniffed = attack(cluster, "sniff", cluster.user, "victim", "240", timeout=400)
    wait_for(lambda: "Training completed successfully!" in run_log(cluster, "victim")
             or "failed due to" in run_log(cluster, "victim"), 400, 1, "the owner's run to end")
    return {**sniffed, "jobs": [j["metadata"]["name"] for j in csctl_jobs(
        cluster, "-l", "name=victim") if j["metadata"]["name"] not in before]}


def test_b23_another_users_client_gets_nothing_from_the_ingress(sniffed_run):
    tries = sniffed_run["tries"]
    # she found the owner's running jobs (the execute job's stream has the checkpoint)
    assert "execute" in {got["job_type"] for got in tries}, sniffed_run
    for got in tries:
        assert not {"log", "file", "done", "error"} & set(got["types"]), got
    # whoever spoke to the worker before the owner's client was told why
    assert all(got["types"] in ([], ["refused"]) for got in tries), tries


def test_the_owners_run_succeeds_with_its_checkpoint(cluster, sniffed_run):
    log = run_log(cluster, "victim")
    assert "Training completed successfully!" in log, log
    assert "failed due to" not in log and "Traceback" not in log
    rc, out = cluster.run(LOGIN, f"ls {FC_MNIST}/model_victim")
    assert rc == 0 and "checkpoint_" in out, out


def test_b11_another_users_logs_are_refused(cluster, attacker, sniffed_run):
    names = sniffed_run["jobs"]  # the owner's compile and execute jobs of this run
    assert len(names) == 2, sniffed_run
    wait_for(lambda: all(job["status"].get("phase") in FINISHED for job in csctl_jobs(
        cluster, "-l", "name=victim") if job["metadata"]["name"] in names), 60, 1,
             "both to end")
    for name in names:
        as_attacker(cluster, "rm -rf /tmp/steal")
        rc, out = as_attacker(cluster, f"csctl log-export {name} -p /tmp/steal")
        assert rc == 1, out
        assert (f"Error: job {name} belongs to {cluster.user}: only its owner may export "
                "its logs") in out
        assert as_attacker(cluster, f"test -e /tmp/steal/{name}.tar.gz")[0] != 0
        direct = attack(cluster, "logs", name)
        assert direct["read"] is False and direct["status"] == 403, direct
        rc, out = cluster.run(LOGIN, f"cd /tmp && csctl log-export {name} && "
                                     f"tar tzf {name}.tar.gz && rm {name}.tar.gz")
        assert rc == 0 and f"{name}/workload.log" in out, out


# D01: no user code beside the control plane; etcd takes the API server alone -----------
ETCD_MODULE = """
import base64, json, socket, ssl, urllib.request
print("HOST", socket.gethostname(), flush=True)
KEY = base64.b64encode(b"/registry/clusterrolebindings/d01-pwned").decode()
VALUE = base64.b64encode(json.dumps({"kind": "ClusterRoleBinding"}).encode()).decode()
BODY = json.dumps({"key": KEY, "value": VALUE}).encode()
for host in ("127.0.0.1", "cer-mgmt-01"):
    for scheme in ("http", "https"):
        try:
            request = urllib.request.Request(f"{scheme}://{host}:2379/v3/kv/put", BODY)
            answer = urllib.request.urlopen(request, timeout=5,
                                            context=ssl._create_unverified_context())
            print("ETCD", host, scheme, "ANSWERED", answer.status, flush=True)
        except Exception as err:
            print("ETCD", host, scheme, "refused", type(err).__name__, flush=True)


def flow(params, **functions):
    return None
"""

# etcd's JSON gateway, as a process on cer-mgmt-01 without the API server's key would
# call it (argv[1]: http or https)
ETCD_PUT = """
import base64, json, ssl, sys, urllib.request
body = json.dumps({"key": base64.b64encode(b"/registry/clusterrolebindings/d01-pwned")
                   .decode(), "value": base64.b64encode(b"{}").decode()}).encode()
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "://127.0.0.1:2379/v3/kv/put",
                                                  body), timeout=5,
                           context=ssl._create_unverified_context())
    print("ANSWERED")
except Exception as err:
    print("refused", type(err).__name__)
"""

ETCD_AS_API_SERVER = """
import json, ssl, urllib.request
pki = "/etc/kubernetes/pki/etcd/"
context = ssl.create_default_context(cafile=pki + "ca.crt")
context.load_cert_chain(pki + "apiserver-client.crt", pki + "apiserver-client.key")
answer = urllib.request.urlopen("https://127.0.0.1:2379/version", timeout=5, context=context)
print(json.load(answer)["etcdserver"])
"""


def test_d01_compiles_run_off_the_control_plane_and_etcd_takes_the_api_server_alone(
        cluster, attacker):
    """mallory's compile workload runs on the first system's host, not on cer-mgmt-01
    beside etcd and the API server, and reaches etcd neither there nor over the network.
    On cer-mgmt-01 itself, a process without the API server's key (`nobody`) is refused by
    etcd over http and over TLS, and cannot read etcd's keys; the API server's own
    certificate gets an answer (etcd is there, with TLS)."""
    name = compile_her_module(cluster, "etcd", ETCD_MODULE)
    exported(lambda c: as_attacker(cluster, c), name)
    log = file_of_export(lambda c: as_attacker(cluster, c), name, "workload.log")
    assert f"HOST {COMPILE_NODE}" in log, log
    tries = [line for line in log.splitlines() if line.startswith("ETCD ")]
    assert len(tries) == 4 and all(" refused " in line for line in tries), log

    mgmt = cluster.host(MGMT)
    mgmt.check_output(f"cat > /tmp/etcd_put.py <<'EOF'\n{ETCD_PUT}EOF\nchmod 644 /tmp/etcd_put.py")
    for scheme in ("http", "https"):
        said = mgmt.check_output(f"runuser -u nobody -- python3 /tmp/etcd_put.py {scheme}")
        assert said.startswith("refused"), (scheme, said)
    keys = mgmt.run("runuser -u nobody -- cat /etc/kubernetes/pki/etcd/apiserver-client.key")
    assert keys.rc != 0 and "Permission denied" in keys.stderr, keys.stdout
    assert "d01-pwned" not in on_mgmt(cluster, "kubectl get clusterrolebindings -o name")
    version = on_mgmt(cluster, f"python3 -c {shlex.quote(ETCD_AS_API_SERVER)}")
    assert version.startswith("3."), version


# D02, D03: one uid per job's user, nothing left behind -----------------------------------
LEAVER_MODULE = """
import ctypes, os, pwd, subprocess, sys
print("WHO", pwd.getpwuid(os.getuid()).pw_name, flush=True)
print("DUMPABLE", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), flush=True)  # PR_GET_DUMPABLE
# a daemon that outlives the job unless someone kills it: double fork, its own session
subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.Popen("
                  "['sleep', '600'], start_new_session=True)"], start_new_session=True).wait()


def flow(params, **functions):
    return None
"""


def test_d02_d03_a_workload_runs_as_its_user_undumpable_and_leaves_nothing(cluster, attacker):
    """mallory's compile workload runs as mallory (not a service user every job shares, so
    it can neither kill, read nor forge another user's), is not dumpable, and the
    `setsid` daemon it starts dies when its job ends."""
    name = compile_her_module(cluster, "leave", LEAVER_MODULE)
    exported(lambda c: as_attacker(cluster, c), name)
    log = file_of_export(lambda c: as_attacker(cluster, c), name, "workload.log")
    assert f"WHO {ATTACKER}" in log and "DUMPABLE 0" in log, log
    for node in (COMPILE_NODE, MGMT):  # where her compile ran, and the control plane
        left = cluster.host(node).run(f"pgrep -a -u {ATTACKER}")
        assert left.rc == 1, (node, left.stdout)  # nothing of hers runs there
