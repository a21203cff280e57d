"""The package's imports run downward only (DESIGN.md, Layout):

    cli → host, exercises → the system rooms → node, devices, datasets (the kernel)
    the vendor facades → the rooms and the kernel

Every import statement of every module is read, those inside functions included,
so a lazy import cannot hide an edge that runs the wrong way.
"""

import ast
from pathlib import Path

import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
ROOMS = {"graphcore", "sambanova", "cerebras", "groq"}
KERNEL = {"devices", "node", "datasets"}
HOST = {"host", "exercises", "classroom"}
FACADES = {"poptorch", "popdist", "sambaflow", "cerebras_pytorch", "cerebras_appliance", "pyslurm",
           "tensorflow_ipu", "groqflow"}  # tensorflow_ipu: installed as tensorflow.python.ipu


def module_name(path: Path) -> str:
    parts = list(path.relative_to(EMULATOR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    """Absolute names of every module the file imports (relative ones resolved)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            # `from aitestbed import host` imports aitestbed.host
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def layer(module: str) -> str | None:
    """The layer a module belongs to: cli, host, a room's name, kernel, facade, or None."""
    parts = module.split(".")
    if parts[0] in FACADES:
        return "facade"
    if parts[0] != "aitestbed" or len(parts) == 1:
        return None
    second = parts[1]
    if second == "cli":
        return "cli"
    if second in HOST:
        return "host"
    if second in ROOMS:
        return second
    if second in KERNEL:
        return "kernel"
    return None


def allowed(source: str, target: str) -> bool:
    if source == target or target is None:
        return True
    if source == "cli":
        return True
    if source == "host":
        return target in ROOMS | {"kernel"}
    if source in ROOMS:
        return target == "kernel"  # never host, another room or a facade
    if source == "kernel":
        return False
    if source == "facade":
        return target in ROOMS | {"kernel"}
    return True


def edges():
    for path in sorted(EMULATOR.rglob("*.py")):
        source = module_name(path)
        for target in sorted(imports(path)):
            yield source, target


def test_the_walk_sees_the_package():
    seen = {source for source, _ in edges()}
    assert {"aitestbed.cli", "aitestbed.host.state", "aitestbed.graphcore.ipu",
            "aitestbed.sambanova.snd.server", "aitestbed.cerebras.agent",
            "aitestbed.node.init", "poptorch._runtime", "tensorflow_ipu._keras"} <= seen


def test_no_import_runs_upward_or_across_rooms():
    wrong = [f"{source} -> {target}" for source, target in edges()
             if not allowed(layer(source), layer(target))]
    assert wrong == []


@pytest.mark.parametrize("source,target,ok", [
    ("aitestbed.devices.ipu", "aitestbed.graphcore.vipu.client", False),
    ("aitestbed.graphcore.ipu", "aitestbed.graphcore.vipu.client", True),
    ("aitestbed.cerebras.agent", "cerebras_pytorch.appliance.errors", False),
    ("cerebras_pytorch.appliance.kubernetes_runner", "aitestbed.cerebras.kubeapi", True),
    ("aitestbed.sambanova.snd.server", "aitestbed.node.processes", True),
    ("aitestbed.node.init", "aitestbed.host.state", False),
    ("aitestbed.graphcore.gc_info", "aitestbed.sambanova.rdu", False),
    ("aitestbed.host.state", "aitestbed.cli", False),
    ("poptorch._runtime", "aitestbed.host.errors", False),
])
def test_the_rule_itself(source, target, ok):
    assert allowed(layer(source), layer(target)) is ok
