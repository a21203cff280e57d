"""Cancel the unfinished wsjobs of the users named (offboarding), as an administrator.

`python -m aitestbed.cerebras.cancel_wsjobs USER...`, which playbooks/offboard-user.yml runs.

Run on the Cerebras management node with the node's aitestbed interpreter, where
root's kubectl is a cluster admin. Prints `cancelled <job>` for each job it cancels.
"""

import json
import subprocess
import sys

from aitestbed.cerebras.kubeapi import NAMESPACE
from aitestbed.cerebras.wsjob import FINISHED, owner, phase


def kubectl(*args: str) -> str:
    return subprocess.run(["kubectl", "-n", NAMESPACE, *args], check=True,
                          capture_output=True, text=True).stdout


def main() -> None:
    users = set(sys.argv[1:])
    for job in json.loads(kubectl("get", "wsjobs", "-o", "json"))["items"]:
        if owner(job) in users and phase(job) not in FINISHED:
            name = job["metadata"]["name"]
            patch = {"spec": {"cancelRequested": True,
                              "cancelReason": "the user was offboarded"}}
            kubectl("patch", "wsjob", name, "--type=merge", "-p", json.dumps(patch))
            print(f"cancelled {name}")


if __name__ == "__main__":
    main()
