"""Create or change many Unix accounts in one process on a node.

roles/accounts used to run Ansible's `user` module once per account per node: a
classroom of thirty learners on fourteen nodes was 420 module runs, a third of
`classroom create`. The role now hands the accounts that differ from the node (its
filter `accounts_pending_users`) to `python -m aitestbed.node.accounts` as JSON on
stdin, once per node, and this runs `useradd` or `usermod` for each, as the `user`
module did:

- the same uid, primary group (the user's own, by name) and supplementary groups
  (exactly these) everywhere; home /home/<name>, never created here (aitestbed.node.homes
  creates homes as their users);
- an offboarded account (`"active": false`) stays, expired (shadow expire day 1), so its
  files keep their owner; an active one has no expiry.

The choice of command is pure (`command_for`); `main` only reads the node's passwd.
"""

from __future__ import annotations

import json
import pwd
import subprocess
import sys

EXPIRED = "1970-01-02"  # shadow's expire field 1, as the `user` module's expires=86400


def command_for(user: dict, current_uid: int | None) -> list[str]:
    """The useradd (current_uid None: no such account) or usermod argv for `user`
    ({name, uid, groups, shell, active})."""
    name = user["name"]
    common = ["-g", name, "-G", ",".join(user.get("groups") or []),
              "-d", f"/home/{name}", "-s", user["shell"]]
    active = user.get("active", True)
    if current_uid is None:
        expire = [] if active else ["-e", EXPIRED]
        return ["useradd", "-M", "-u", str(user["uid"]), *common, *expire, name]
    # usermod -u re-owns the files in the home: only when the uid really changes.
    uid = [] if current_uid == int(user["uid"]) else ["-u", str(user["uid"])]
    return ["usermod", *uid, *common, "-e", "" if active else EXPIRED, name]


def _uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return None


def main() -> None:
    """{"users": [...]} on stdin; prints each account made or changed; exits 1 (after
    trying every account) if any command failed."""
    failed = []
    for user in json.load(sys.stdin)["users"]:
        argv = command_for(user, _uid(user["name"]))
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode:
            failed.append(f"{argv[0]} {user['name']}: {result.stderr.strip()}")
        else:
            print(f"{argv[0]} {user['name']}")
    for line in failed:
        print(f"aitestbed accounts: {line}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
