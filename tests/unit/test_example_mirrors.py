"""`git clone` of the guide's example repositories answers on every node class users clone on.

The plays are read as Ansible applies them (their node-class groups, their `when`
evaluated by Ansible's engine for each node class), and the mirror tasks' git settings,
rendered the same way, are handed to real git with only the file protocol allowed: a
clone that was not redirected to the mirror fails instead of reaching the network.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from aitestbed.host.role_templates import role_dir

from . import ansible_render

pytestmark = pytest.mark.unit

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def _applies(when: str | None, node_class: str) -> bool:
    if when is None:
        return True
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables={"node_class": node_class})
    return bool(templar.template(trust_as_template("{{ " + when + " }}")))


def _targets(hosts: str, node_class: str) -> bool:
    """A play's host pattern: all, or the node-class groups (plays/node-classes.yml)."""
    return hosts == "all" or f"class_{node_class}" in hosts.split(":")


def task_files(playbook: str, node_class: str) -> set[tuple[str, str]]:
    """(role, tasks file) pairs a play of playbooks/<playbook> runs on that class."""
    found = set()
    for play in yaml.safe_load((PLAYBOOKS / playbook).read_text()):
        if "hosts" not in play or not _targets(play["hosts"], node_class):
            continue  # an import, or a play for other classes
        for role in play.get("roles", []):
            role = {"role": role} if isinstance(role, str) else role
            if _applies(role.get("when"), node_class):
                found.add((role["role"], "main"))
                found.update((dep, "main") for dep in _dependencies(role["role"]))
        for task in play.get("tasks", []):
            include = task.get("ansible.builtin.include_role")
            if include and _applies(task.get("when"), node_class):
                found.add((include["name"], include.get("tasks_from", "main")))
    return found


def _dependencies(role: str) -> list[str]:
    meta = yaml.safe_load((role_dir(role) / "meta" / "main.yml").read_text()) or {}
    return [d if isinstance(d, str) else d["role"] for d in meta.get("dependencies", [])]


def _imports(role: str, tasks: str) -> set[str]:
    """The tasks files a role's tasks file runs (itself and its import_tasks)."""
    files = {tasks}
    for task in yaml.safe_load((role_dir(role) / "tasks" / f"{tasks}.yml").read_text()):
        imported = task.get("ansible.builtin.import_tasks")
        if imported:
            files |= _imports(role, imported.removesuffix(".yml"))
    return files


def runs(playbook: str, node_class: str, role: str, tasks: str) -> bool:
    return any(r == role and tasks in _imports(r, t) for r, t in task_files(playbook, node_class))


def test_the_graphcore_examples_mirror_is_on_the_login_nodes_and_the_ipu_hosts():
    for node_class in ("login", "ipu_node"):
        assert runs("graphcore.yml", node_class, "graphcore_sdk", "examples_mirror"), node_class
    # Only the mirror on the login class, not the SDKs and datasets.
    assert ("graphcore_sdk", "main") not in task_files("graphcore.yml", "login")


def test_the_modelzoo_mirror_is_on_the_login_nodes():
    assert runs("cerebras.yml", "login", "cerebras_login", "main")


def _git(*args: str, cwd: Path, config: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", GIT_ALLOW_PROTOCOL="file",
               HOME=str(cwd), GIT_TERMINAL_PROMPT="0")
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_guides_clone_of_graphcore_examples_reaches_the_mirror(tmp_path):
    mirror = tmp_path / "mirrors" / "examples.git"
    subprocess.run([str(role_dir("graphcore_sdk") / "files" / "build-examples-mirror.sh"),
                    str(role_dir("graphcore_sdk") / "files" / "examples"), str(mirror)],
                   check=True, capture_output=True, timeout=120)
    variables = {"graphcore_sdk_examples_mirror": str(mirror)}
    config = tmp_path / "gitconfig"
    for name in ("Send `git clone` of graphcore/examples to the mirror",
                 "Let every user clone the mirror (git refuses repositories other users own)"):
        task = ansible_render.role_task("graphcore_sdk", "examples_mirror.yml", name)
        args = task["community.general.git_config"]
        rendered = ansible_render.render_task_args("graphcore_sdk", args, variables)
        assert _git("config", "--global", "--add", rendered["name"], rendered["value"],
                    cwd=tmp_path, config=config).returncode == 0
    home = tmp_path / "home"
    home.mkdir()
    clone = _git("clone", "https://github.com/graphcore/examples.git", cwd=home, config=config)
    assert clone.returncode == 0, clone.stderr
    tags = _git("tag", cwd=home / "examples", config=config).stdout.split()
    assert tags == ["v3.1.0", "v3.3.0"]
    assert (home / "examples" / "tutorials/simple_applications/pytorch/mnist/mnist_poptorch.py"
            ).is_file()
    # Without the role's settings the same clone is refused here (file protocol only),
    # so the test cannot pass by reaching the network.
    other = tmp_path / "other"
    other.mkdir()
    refused = _git("clone", "https://github.com/graphcore/examples.git", cwd=other,
                   config=tmp_path / "empty-gitconfig")
    assert refused.returncode != 0
