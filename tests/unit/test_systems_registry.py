"""The systems registry (aitestbed.host.systems): host code asks it and names no system;
each entry agrees with its playbook and its room; a profile or --systems subset builds the
artifacts of its systems only."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aitestbed.host import systems
from aitestbed.host.inventory import load
from aitestbed.host.jobrun import plan, runner

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "emulator" / "aitestbed"
NAMES = re.compile(r"(cerebras|graphcore|sambanova|groq|metis|sn10|sn30)", re.I)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (module, class, function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def system_names_in(path: Path) -> list[str]:
    """Where the module's code names a system: an import of a room, a name, or a string
    that is not a docstring (comments and docstrings may say which system they describe)."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.ImportFrom):
            text = node.module or ""
            text += " " + " ".join(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            text = " ".join(a.name for a in node.names)
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            text = node.name
        elif isinstance(node, ast.arg):
            text = node.arg
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs:
            text = node.value
        if text and NAMES.search(text):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]!r}")
    return found


def host_modules() -> list[Path]:
    registry = PACKAGE / "host" / "systems"
    return sorted([PACKAGE / "cli.py",
                   *(p for p in (PACKAGE / "host").rglob("*.py") if registry not in p.parents)])


def test_no_host_module_names_a_system():
    named = [hit for path in host_modules() for hit in system_names_in(path)]
    assert not named, ("host code asks the registry (aitestbed.host.systems) instead of "
                       "naming a system:\n" + "\n".join(named))


def test_the_check_finds_a_system_named():
    probe = PACKAGE / "host" / "_probe_registry_test.py"
    try:
        probe.write_text('"""About Graphcore: a docstring may."""\n# groq: a comment may\n'
                         'from aitestbed.cerebras import wsjob\nX = "sn10"\n'
                         'def build_sambanova():\n    return X\n')
        hits = system_names_in(probe)
    finally:
        probe.unlink()
    assert sorted(h.split(": ", 1)[1] for h in hits) == [
        "'aitestbed.cerebras wsjob'", "'build_sambanova'", "'sn10'"]


def test_every_room_has_one_entry_and_every_entry_a_room_and_playbook():
    rooms = {p.name for p in PACKAGE.iterdir()
             if p.is_dir() and (p / "__init__.py").is_file()} - {
        "host", "node", "devices", "datasets", "classroom", "exercises"}
    assert rooms == set(systems.names())
    for name in systems.names():
        assert (ROOT / "playbooks" / f"{name}.yml").is_file()
        assert (ROOT / "inventory" / "group_vars" / f"{name}_system.yml").is_file()


def _plays(name: str) -> list[dict]:
    return [p for p in yaml.safe_load((ROOT / "playbooks" / f"{name}.yml").read_text())
            if "hosts" in p]


def test_node_classes_are_the_classes_its_playbook_configures():
    shared = {}
    for system in systems.every():
        classes = set()
        for play in _plays(system.name):
            parts = play["hosts"].split(":")
            play_classes = {p.removeprefix("class_") for p in parts if p.startswith("class_")}
            classes |= play_classes
            for node_class in play_classes:
                shared.setdefault(node_class, set()).add(system.name)
        assert classes == set(system.node_classes), system.name
    for system in systems.every():
        for play in _plays(system.name):
            parts = play["hosts"].split(":")
            if any(len(shared[p.removeprefix("class_")]) > 1 for p in parts
                   if p.startswith("class_")):
                # A class several systems configure: the play runs where the image carries
                # this system only (plays/node-classes.yml makes the with_* groups).
                assert f"&with_{system.name}" in parts, (system.name, play["name"])


@pytest.mark.parametrize("profile, subset, wanted, unwanted", [
    ("alcf", None, {"cerebras", "graphcore", "sambanova"}, {"groq", "metis"}),
    ("mini", ["graphcore"], {"graphcore"}, {"cerebras", "sambanova", "groq", "metis"}),
    ("mini", ["sambanova"], {"sambanova"}, {"cerebras", "graphcore", "groq", "metis"}),
    ("alcf-2026-mini", ["groq"], {"groq"}, {"cerebras", "graphcore", "sambanova", "metis"}),
    ("alcf-2026-mini", ["metis"], {"metis"}, {"cerebras", "graphcore", "sambanova", "groq"}),
    ("alcf-2026", ["cerebras"], {"cerebras"}, {"graphcore", "sambanova", "groq", "metis"}),
    ("alcf-2026", None, {"cerebras", "graphcore", "groq", "metis"}, {"sambanova"}),
])
def test_a_profile_builds_the_artifacts_of_its_systems_only(profile, subset, wanted, unwanted):
    topology = load(profile, subset)
    carried = {s for classes in topology.class_systems.values() for s in classes}
    names = [a.name for a in systems.artifacts(carried)]
    for system in systems.of(wanted):
        assert all(a.name in names for a in system.artifacts)
    for system in systems.of(unwanted):
        assert not any(a.name in names for a in system.artifacts), system.name
    assert names[:len(systems.common_artifacts())] == [a.name for a in
                                                       systems.common_artifacts()]


def test_the_default_profile_builds_no_openpbs():
    topology = load("alcf")
    carried = {s for classes in topology.class_systems.values() for s in classes}
    assert not any("OpenPBS" in a.name for a in systems.artifacts(carried))
    assert topology.class_systems["login"] == ("cerebras", "graphcore")
    assert topology.class_systems["slurmctld"] == ()


def test_run_targets_come_from_the_registry():
    assert list(systems.run_targets()) == ["cerebras", "graphcore", "sambanova", "sn10", "groq"]
    with pytest.raises(plan.PlanError,
                       match="choose one of cerebras, graphcore, sambanova, sn10, groq"):
        plan.run_target("nope")
    for target in systems.run_targets().values():
        assert target.system in systems.names()
        assert target.scheduler in ("slurm", "wsjob", "pbs")
        assert target.scheduler in runner.FOLLOW


def test_a_shared_class_gets_the_plays_of_its_images_systems_only(tmp_path):
    """plays/node-classes.yml's with_<system> groups, run by Ansible: a login image built
    for cerebras and graphcore gets their login plays and not Groq's; one whose systems are
    not set (a hand-made inventory) gets those of every system group it has."""
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"hosts": {
        "two": {**local, "node_class": "login", "image_systems": ["cerebras", "graphcore"]},
        "none": {**local, "node_class": "slurmctld", "image_systems": []}},
        "children": {"groq_system": {"hosts": {"byhand": {**local, "node_class": "login"}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    plays = [{"name": "Node classes", "ansible.builtin.import_playbook":
              str(ROOT / "playbooks" / "plays" / "node-classes.yml")}]
    plays += [{"name": name, "hosts": f"class_login:&with_{name}", "gather_facts": False,
               "tasks": [{"ansible.builtin.debug": {"msg": f"PLAYED {name}"}}]}
              for name in systems.names()]
    (tmp_path / "probe.yml").write_text(yaml.safe_dump(plays))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-playbook")), "-i", "inventory.yml",
         "probe.yml"], cwd=tmp_path, capture_output=True, text=True, check=False,
        env={**os.environ, "ANSIBLE_STRATEGY": "linear", "ANSIBLE_NOCOLOR": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    played = set(re.findall(r'ok: \[(\w+)\] => \{\s+"msg": "PLAYED (\w+)"', result.stdout))
    assert played == {("two", "cerebras"), ("two", "graphcore"), ("byhand", "groq")}
