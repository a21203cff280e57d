"""What Ansible itself renders: its template engine, used the way the template module uses it.

ansible.builtin.template (ansible/plugins/action/template.py) gives the engine the
role's template with the options below, and the play's variables with the role's
defaults beneath them. A role's task is run here the same way: its loop and its
vars are templated by the engine for each item before its template is.
"""

from pathlib import Path

import yaml
from aitestbed.host.role_templates import role_dir

# What ansible.builtin.template passes to the engine by default.
TEMPLATE_MODULE = {"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"}


def _templar(variables: dict):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    return Templar(loader=DataLoader(), variables=variables)


def _expression(templar, value):
    from ansible.template import trust_as_template

    return templar.template(trust_as_template(value)) if isinstance(value, str) else value


def role_defaults(role: str) -> dict:
    path = role_dir(role) / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) if path.is_file() else None) or {}


def template(role: str, name: str, variables: dict) -> str:
    """The bytes the template module writes for roles/<role>/templates/<name>."""
    from ansible.template import trust_as_template

    text = (role_dir(role) / "templates" / name).read_text()
    rendered = _templar({**role_defaults(role), **variables}).template(
        trust_as_template(text), escape_backslashes=False, overrides=TEMPLATE_MODULE)
    assert isinstance(rendered, str)
    return str(rendered)


def role_task(role: str, tasks: str, name: str) -> dict:
    """The task called `name` in roles/<role>/tasks/<tasks>."""
    found = [t for t in yaml.safe_load((role_dir(role) / "tasks" / tasks).read_text())
             if t.get("name") == name]
    assert len(found) == 1, f"{role}/tasks/{tasks} has no single task {name!r}"
    return found[0]


def render_task_args(role: str, args: dict, variables: dict) -> dict:
    """A task's module arguments as Ansible templates them (the role's defaults beneath)."""
    templar = _templar({**role_defaults(role), **variables})
    return {key: _expression(templar, value) for key, value in args.items()}


def run_template_task(role: str, tasks: str, name: str, variables: dict) -> dict[str, str]:
    """dest -> the bytes a looping ansible.builtin.template task writes for each item."""
    task = role_task(role, tasks, name)
    args = task["ansible.builtin.template"]
    play = {**role_defaults(role), **variables}
    written = {}
    for item in _expression(_templar(play), task.get("loop", [None])):
        scope = {**play, "item": item}
        templar = _templar(scope)
        scope.update({k: _expression(templar, v) for k, v in task.get("vars", {}).items()})
        dest = str(_expression(_templar(scope), args["dest"]))
        written[dest] = template(role, Path(args["src"]).name, scope)
    return written
