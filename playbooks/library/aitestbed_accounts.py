#!/usr/bin/python
"""Ansible module: ask a cluster's account registry (aitestbed.host.accounts) for a change.

It runs on the controller (localhost, the Python that runs ansible-playbook, which
has the aitestbed package), checks the request in full, records it in the
cluster's state directory and returns what the nodes need (accounts.json).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: aitestbed_accounts
short_description: Onboard, join, offboard and expire in an aitestbed cluster's registry
description:
  - Checks a request against the inventory's accounts and projects and the cluster's
    registry, records it, and renders accounts.json and the passcode enrolments.
    A bad request changes nothing.
options:
  cluster: {description: The cluster's name., type: str, required: true}
  action:
    description: What to do.
    type: str
    required: true
    choices: [onboard, join, offboard, expire]
  users: {description: The users concerned., type: list, elements: str, default: []}
  project: {description: The project (join, expire)., type: str}
  accounts: {description: The inventory's accounts., type: list, elements: dict, default: []}
  projects: {description: The inventory's projects., type: list, elements: dict, default: []}
  account_policy: {description: Quotas and purge policy., type: dict, default: {}}
  system_groups: {description: System name to gid., type: dict, required: true}
  confirm: {description: Really purge (expire)., type: bool, default: false}
  today: {description: The date to judge end dates by (YYYY-MM-DD)., type: str}
"""

import datetime as dt  # noqa: E402 - Ansible modules document themselves first

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def main() -> None:
    module = AnsibleModule(argument_spec={
        "cluster": {"type": "str", "required": True},
        "action": {"type": "str", "required": True,
                   "choices": ["onboard", "join", "offboard", "expire"]},
        "users": {"type": "list", "elements": "str", "default": []},
        "project": {"type": "str"},
        "accounts": {"type": "list", "elements": "dict", "default": []},
        "projects": {"type": "list", "elements": "dict", "default": []},
        "account_policy": {"type": "dict", "default": {}},
        "system_groups": {"type": "dict", "required": True},
        "confirm": {"type": "bool", "default": False},
        "today": {"type": "str"},
    }, supports_check_mode=False)
    try:
        from aitestbed.host import storage
        from aitestbed.host.accounts import AccountError, Spec
        from aitestbed.host.errors import AitestbedError
        from aitestbed.host.inventory import load as load_inventory
        from aitestbed.host.state import ClusterState
    except ImportError as err:
        module.fail_json(msg=f"run this playbook with `aitestbed playbook` ({err})")
    p = module.params
    try:
        today = dt.date.fromisoformat(p["today"]) if p["today"] else dt.date.today()
        spec = Spec.from_vars(p["system_groups"], p["accounts"], p["projects"],
                              p["account_policy"])
        state = ClusterState(p["cluster"])
        record = state.load()
        registry = state.registry()
        result = {"changed": False}
        if p["action"] in ("onboard", "offboard") and not p["users"]:
            raise AccountError("name the user(s): -e user=NAME[,NAME...]")
        if p["action"] in ("join", "expire") and not p["project"]:
            raise AccountError("name the project: -e project=NAME")
        if p["action"] == "onboard":
            result["changed"] = bool(registry.onboard(spec, p["users"], today=today))
        elif p["action"] == "join":
            if len(p["users"]) != 1:
                raise AccountError("name one user: -e user=NAME")
            registry.join(spec, p["users"][0], p["project"], today)
            result["changed"] = True
        elif p["action"] == "offboard":
            for user in p["users"]:
                result["changed"] |= registry.offboard(user)
        else:
            purge_date = registry.purge_date(spec, p["project"])
            if p["project"] not in registry.projects:
                raise AccountError(f"project {p['project']} was never created in this cluster")
            result.update(purge_date=str(purge_date), due=purge_date <= today,
                          purged=registry.projects[p["project"]]["purged"])
            if not result["due"]:
                raise AccountError(
                    f"project {p['project']} ends on {registry.projects[p['project']]['end_date']}"
                    f": its data may be purged from {purge_date} (policy: "
                    f"{spec.policy['purge_after_months']} months after the end)")
            if p["confirm"] and not result["purged"]:
                registry.mark_purged(p["project"])
                result["changed"] = True
        topology = load_inventory(record.profile, record.systems)
        result["accounts"] = state.publish_accounts(topology, registry, spec.system_groups)
        if record.storage == "image":
            # Each home and project directory a subvolume with its quota, on the host,
            # before the nodes apply the accounts (aitestbed.host.storage).
            for warning in storage.apply_accounts(state.root, storage.topology_mounts(topology),
                                                  result["accounts"]):
                module.warn(warning)
    except (AccountError, AitestbedError) as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
