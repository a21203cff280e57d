"""Accounts and projects as code: the inventory says who, the registry says what was done.

The inventory's `accounts` and `projects` (group_vars/all.yml, or a vars file given to a
playbook with `-e @FILE`) describe people and projects. Each cluster keeps a registry
in its state directory (accounts/registry.json) of what was onboarded, joined,
offboarded and purged there; `up` and the account playbooks change it only through
this module, which checks every request in full before it writes anything, so a
bad request leaves nothing half-created. What the nodes need (accounts.json and the
passcode enrolments) is rendered from the registry by `ClusterState.publish_accounts`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema

from aitestbed.host.errors import AitestbedError

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
DEFAULT_POLICY = {
    "home_quota": {"bytes": "1T", "files": 1_000_000},
    "project_quota": {"bytes": "2T", "files": 2_000_000},
    "purge_after_months": 6,
    "offboard_home": "keep",
}
TOKENS = ("mobilepass", "cryptocard")

_NAME = r"^[a-z_][a-z0-9_-]{0,31}$"
_QUOTA = {
    "type": "object",
    "properties": {
        "bytes": {"anyOf": [{"type": "integer", "minimum": 0},
                            {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?\s*[KMGTP]?i?B?$"}]},
        "files": {"type": "integer", "minimum": 0},
    },
    "additionalProperties": False,
}
ACCOUNT_SCHEMA = {
    "type": "object",
    "required": ["name", "uid"],
    "properties": {
        "name": {"type": "string", "pattern": _NAME},
        "uid": {"type": "integer", "minimum": 1000, "maximum": 59999},
        "systems": {"type": "array", "items": {"type": "string"}},
        "token": {"enum": list(TOKENS)},
        "pin": {"type": "string", "pattern": r"^[0-9]{4}$"},
        "shell": {"type": "string"},
        "quota": _QUOTA,
        "email": {"type": "string"},
    },
    "additionalProperties": False,
}
PROJECT_SCHEMA = {
    "type": "object",
    "required": ["name", "gid", "pi", "end_date"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"},
        "gid": {"type": "integer", "minimum": 1000, "maximum": 59999},
        "pi": {"type": "string", "pattern": _NAME},
        "members": {"type": "array", "items": {"type": "string", "pattern": _NAME}},
        "systems": {"type": "array", "items": {"type": "string"}},
        "quota": _QUOTA,
        "end_date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
    },
    "additionalProperties": False,
}


class AccountError(AitestbedError):
    """A request about accounts or projects that cannot be done (nothing was changed)."""


def parse_size(value: int | str) -> int:
    """`1T`, `2 TiB`, `500G` or a number of bytes -> bytes (powers of 1024)."""
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?)i?B?", value.strip())
    if not match:
        raise AccountError(f"cannot read the size {value!r}: write e.g. 1T, 500G or bytes")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def _quota(given: dict | None, default: dict) -> dict:
    merged = {**default, **(given or {})}
    return {"bytes": parse_size(merged["bytes"]), "files": int(merged["files"])}


def _date(text: str, what: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise AccountError(f"{what}: {text!r} is not a date (YYYY-MM-DD)") from None


def add_months(day: dt.date, months: int) -> dt.date:
    month = day.month - 1 + months
    year, month = day.year + month // 12, month % 12 + 1
    for last in (31, 30, 29, 28):
        try:
            return dt.date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable")


@dataclass
class Spec:
    """The inventory's accounts, projects and policy, checked."""

    system_groups: dict[str, int]
    accounts: dict[str, dict] = field(default_factory=dict)
    projects: dict[str, dict] = field(default_factory=dict)
    policy: dict = field(default_factory=lambda: dict(DEFAULT_POLICY))

    @classmethod
    def from_vars(cls, system_groups: dict, accounts: list | None, projects: list | None,
                  policy: dict | None = None) -> Spec:
        spec = cls(system_groups=dict(system_groups), policy={**DEFAULT_POLICY, **(policy or {})})
        for kind, items, schema, into in (("accounts", accounts, ACCOUNT_SCHEMA, spec.accounts),
                                          ("projects", projects, PROJECT_SCHEMA, spec.projects)):
            for index, item in enumerate(items or []):
                label = f"{kind}[{index}]" + (f" ({item['name']})" if isinstance(item, dict)
                                              and "name" in item else "")
                _validate(item, schema, label)
                if item["name"] in into:
                    raise AccountError(f"{label}: {item['name']!r} is listed twice in {kind}")
                into[item["name"]] = item
        for name, account in spec.accounts.items():
            if "pin" in account and account.get("token", "mobilepass") != "cryptocard":
                raise AccountError(f"account {name}: a PIN is for CRYPTOCard users: "
                                   "add `token: cryptocard` or drop the pin")
            spec.check_systems(account.get("systems", []), f"account {name}")
        for name, project in spec.projects.items():
            spec.check_systems(project.get("systems", []), f"project {name}")
            _date(project["end_date"], f"project {name}: end_date")
            if name in spec.accounts or name in spec.system_groups:
                raise AccountError(f"project {name}: the name is taken by a user or a system "
                                   "group (every project is a Unix group)")
        return spec

    def check_systems(self, systems: list[str], what: str) -> None:
        unknown = [s for s in systems if s not in self.system_groups]
        if unknown:
            raise AccountError(f"{what}: unknown system {unknown[0]!r}: choose from "
                               f"{', '.join(self.system_groups)}")

    def account(self, name: str) -> dict:
        if name not in self.accounts:
            raise AccountError(f"unknown user {name!r}: add it to the inventory's `accounts` "
                               "(name, uid, systems) first")
        return self.accounts[name]

    def project(self, name: str) -> dict:
        if name not in self.projects:
            raise AccountError(f"unknown project {name!r}: add it to the inventory's `projects` "
                               "(name, gid, pi, members, systems, end_date) first")
        return self.projects[name]


def _validate(item: object, schema: dict, label: str) -> None:
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(item), key=lambda e: e.path)
    if not errors:
        return
    err = errors[0]
    where = ".".join(str(p) for p in err.path)
    if where == "pin":
        raise AccountError(f"{label}: the PIN must be 4 digits, not {err.instance!r}")
    raise AccountError(f"{label}: {where + ': ' if where else ''}{err.message}")


class Registry:
    """What was done in one cluster: users (active or offboarded) and projects."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.path = directory / "registry.json"
        data = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.users: dict[str, dict] = data.get("users", {})
        self.projects: dict[str, dict] = data.get("projects", {})

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"users": self.users, "projects": self.projects},
                                  indent=2, sort_keys=True) + "\n")
        tmp.replace(self.path)

    # secrets --------------------------------------------------------------
    def token(self, name: str) -> dict:
        """The user's passcode token: TOTP secret (hex), and the PIN for CRYPTOCard."""
        path = self.directory / "tokens" / f"{name}.json"
        return json.loads(path.read_text())

    def _enrol(self, name: str, account: dict) -> None:
        path = self.directory / "tokens" / f"{name}.json"
        token = json.loads(path.read_text()) if path.is_file() else {}
        kind = account.get("token", "mobilepass")
        wanted = {"type": kind, "secret": token.get("secret") or secrets.token_hex(20)}
        if kind == "cryptocard":
            generated = f"{secrets.randbelow(10**4):04d}"
            wanted["pin"] = account.get("pin") or token.get("pin") or generated
        if wanted != token:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".tmp")
            tmp.touch(mode=0o600)
            tmp.write_text(json.dumps(wanted) + "\n")
            tmp.replace(path)

    # requests -------------------------------------------------------------
    def onboard(self, spec: Spec, names: list[str], today: dt.date | None = None) -> list[str]:
        """Create (or re-activate) the named accounts as the spec describes them.

        With `today`, a user whose project has ended is refused (the playbooks); `up`
        passes none and re-applies what the inventory says.
        """
        wanted = {name: self._resolve_user(spec, spec.account(name)) for name in names}
        projects = sorted({p for record in wanted.values() for p in record["projects"]})
        for project in projects if today else []:
            end = _date(spec.project(project)["end_date"], f"project {project}: end_date")
            if end < today:
                raise AccountError(f"project {project} ended on {end}: it cannot take new "
                                   "members")
        self._check_ids(spec, wanted)
        changed = self._sync_projects(spec, [p for p in projects if p in spec.projects])
        for name, record in wanted.items():
            self._enrol(name, spec.accounts[name])
            if self.users.get(name) != record:
                changed.append(name)
                self.users[name] = record
        self.save()
        return sorted(set(changed))

    def _resolve_user(self, spec: Spec, account: dict) -> dict:
        name = account["name"]
        memberships = sorted(p for p, body in spec.projects.items()
                             if name in body.get("members", []) or body["pi"] == name)
        systems = set(account.get("systems", []))
        for project in memberships:
            systems |= set(spec.projects[project].get("systems", []))
        previous = self.users.get(name, {})
        return {
            "uid": account["uid"],
            "gid": account["uid"],
            "systems": sorted(systems, key=list(spec.system_groups).index),
            "projects": sorted(set(previous.get("projects", [])) | set(memberships))
            if previous.get("active", True) else memberships,
            "shell": account.get("shell", "/bin/bash"),
            "token": account.get("token", "mobilepass"),
            "quota": _quota(account.get("quota"), spec.policy["home_quota"]),
            "active": True,
        }

    def _check_ids(self, spec: Spec, wanted: dict[str, dict]) -> None:
        uids = {r["uid"]: n for n, r in self.users.items() if n not in wanted}
        gids = {g: n for n, g in spec.system_groups.items()}
        gids |= {p["gid"]: n for n, p in self.projects.items()}
        for name, record in wanted.items():
            for taken in (uids, gids):
                owner = taken.get(record["uid"])
                if owner is not None and owner != name:
                    raise AccountError(f"duplicate uid {record['uid']}: user {name} would share "
                                       f"it with {owner}; give {name} another uid")
            uids[record["uid"]] = name

    def _sync_projects(self, spec: Spec, names: list[str]) -> list[str]:
        """Create or update the named projects (members that are registered users)."""
        changed = []
        for name in names:
            body = spec.projects[name]
            previous = self.projects.get(name, {})
            owners = {p["gid"]: n for n, p in self.projects.items() if n != name}
            owners |= {u["uid"]: n for n, u in self.users.items()}
            owners |= {g: n for n, g in spec.system_groups.items()}
            if owners.get(body["gid"], name) != name:
                raise AccountError(f"duplicate gid {body['gid']}: project {name} would share it "
                                   f"with {owners[body['gid']]}")
            record = {
                "gid": body["gid"], "pi": body["pi"],
                "systems": list(body.get("systems", [])),
                "quota": _quota(body.get("quota"), spec.policy["project_quota"]),
                "end_date": body["end_date"],
                "purged": previous.get("purged", False),
            }
            if previous != record:
                self.projects[name] = record
                changed.append(name)
        return changed

    def join(self, spec: Spec, user: str, project: str, today: dt.date) -> None:
        """Add a registered user to a project (its group and its systems)."""
        body = spec.project(project)
        record = self.users.get(user)
        if record is None or not record["active"]:
            state = "was offboarded" if record else "has no account here"
            raise AccountError(f"user {user!r} {state}: onboard the user first "
                               "(playbooks/onboard-user.yml)")
        if project in record["projects"]:
            raise AccountError(f"user {user} is already a member of project {project}")
        end = _date(body["end_date"], f"project {project}: end_date")
        if end < today or self.projects.get(project, {}).get("purged"):
            raise AccountError(f"project {project} ended on {end}: it cannot take new members")
        self._sync_projects(spec, [project])
        record["projects"] = sorted([*record["projects"], project])
        record["systems"] = sorted(set(record["systems"]) | set(body.get("systems", [])),
                                   key=list(spec.system_groups).index)
        self.save()

    def offboard(self, user: str) -> bool:
        record = self.users.get(user)
        if record is None:
            raise AccountError(f"unknown user {user!r}: this cluster never onboarded it")
        if not record["active"]:
            return False
        record["active"] = False
        self.save()
        return True

    def purge_date(self, spec: Spec, project: str) -> dt.date:
        body = self.projects.get(project) or spec.project(project)
        end = _date(body["end_date"], f"project {project}: end_date")
        return add_months(end, int(spec.policy["purge_after_months"]))

    def mark_purged(self, project: str) -> None:
        self.projects[project]["purged"] = True
        self.save()

    # what the nodes need ----------------------------------------------------
    def resolved(self, system_groups: dict[str, int], keys: dict[str, list[str]]) -> dict:
        """accounts.json: groups, projects and users, as node-init and the roles read it."""
        projects = []
        for name, body in sorted(self.projects.items()):
            members = sorted(u for u, r in self.users.items()
                             if r["active"] and name in r["projects"])
            projects.append({"name": name, "gid": body["gid"], "pi": body["pi"],
                             "members": members, "systems": body["systems"],
                             "quota": body["quota"], "end_date": body["end_date"],
                             "purged": body["purged"]})
        users = []
        for name, record in sorted(self.users.items(), key=lambda item: item[1]["uid"]):
            active = record["active"]
            users.append({
                "name": name, "uid": record["uid"], "gid": record["gid"],
                "groups": [*record["systems"], *record["projects"]] if active else [],
                "shell": record["shell"], "authorized_keys": keys.get(name, []),
                "quota": record["quota"], "active": active,
            })
        return {"groups": [{"name": g, "gid": gid} for g, gid in system_groups.items()],
                "projects": projects, "users": users}
