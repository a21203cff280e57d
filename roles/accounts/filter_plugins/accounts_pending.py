"""Which groups and users a node must still create or change (the rest are left alone).

The account tasks loop only over these, so a playbook run costs what changed, not the
number of accounts: a classroom of a hundred learners, then one more person onboarded,
is one user's work on each node. The node's state comes from `ansible.builtin.getent`
(passwd, group, shadow), read once per run.
"""

from __future__ import annotations


def pending_groups(wanted: dict, group: dict | None) -> list[dict]:
    """{name: gid} -> [{name, gid}] of the groups missing or with another gid."""
    group = group or {}
    return [{"name": name, "gid": gid} for name, gid in wanted.items()
            if str((group.get(name) or [None, None])[1]) != str(gid)]


def _members(group: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for name, fields in group.items():
        for member in (fields[2] if len(fields) > 2 and fields[2] else "").split(","):
            if member:
                found.setdefault(member, set()).add(name)
    return found


def pending_users(users: list, passwd: dict | None, group: dict | None,
                  shadow: dict | None) -> list[dict]:
    """The accounts (as roles/accounts creates them) that differ from the node's."""
    passwd, group, shadow = passwd or {}, group or {}, shadow or {}
    members = _members(group)
    found = []
    for user in users:
        entry = passwd.get(user["name"])
        # getent passwd: [x, uid, gid, gecos, home, shell]; shadow: [pw, lastchg, min,
        # max, warn, inactive, expire, ...]
        expire = (shadow.get(user["name"]) or [""] * 7)[6] if user["name"] in shadow else None
        wanted_expire = "" if user.get("active", True) else "1"
        primary = group.get(user["name"])
        if (entry is None
                or str(entry[1]) != str(user["uid"])
                or primary is None or str(primary[1]) != str(user["gid"])
                or str(entry[2]) != str(user["gid"])
                or entry[4] != f"/home/{user['name']}"
                or entry[5] != user["shell"]
                or members.get(user["name"], set()) != set(user["groups"])
                or (expire if expire is not None else None) != wanted_expire):
            found.append(user)
    return found


class FilterModule:
    def filters(self):
        return {"accounts_pending_groups": pending_groups,
                "accounts_pending_users": pending_users}
