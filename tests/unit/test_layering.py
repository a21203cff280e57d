"""The emulator's imports run downward only and close no circle (docs/architecture.md,
the emulator/ part of its layout).

The layers of emulator/aitestbed, highest first; a folder imports its own folder and
the folders of the layers below it:

    cli > classroom > exercises > host > the system rooms > the kernel

  - host/ is one layer with everything under it (systems/, provider/, jobrun/);
  - the system rooms (cerebras, graphcore, sambanova, groq, metis) never import one
    another;
  - the kernel folders (node, devices, datasets) import nothing above them and, today,
    nothing of one another either: KERNEL_EDGES declares an edge between two of them
    should one ever be needed;
  - the package itself (`aitestbed`, its __version__) may be imported by anyone.

The vendor facades (every other package under emulator/) import the rooms and the
kernel, never cli, classroom, exercises or host, and another facade only along an edge
FACADE_EDGES declares. Nothing in aitestbed imports a facade. A folder or facade no
layer names fails the walk, with where to declare it.

An import is every import statement (those inside functions included, so a lazy import
cannot hide an edge), `importlib.import_module("...")` and `__import__("...")` with a
literal name, and a "module:attr" entry string naming an attribute of a module of
emulator/ (a runner named in configuration). `from package import name` is an edge to
package.name when that is a module, else to package; `import a.b` is an edge to a.b.

No circle: over the whole graph of emulator/'s modules, no module reaches itself
through the imports that run (imports under `if TYPE_CHECKING:` never run: they count
for the layers, not for circles). A circle is printed edge by edge with file and line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
HERE = "tests/unit/test_layering.py"
ENTRY = re.compile(r"([A-Za-z_][\w.]*):([A-Za-z_]\w*)(\.\w+)*")  # "module:attr"

ROOMS = frozenset({"cerebras", "graphcore", "sambanova", "groq", "metis"})
KERNEL = frozenset({"node", "devices", "datasets"})
# Highest first. host/systems/ (the systems registry) is part of host.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("cli", frozenset({"cli"})),
    ("classroom", frozenset({"classroom"})),
    ("exercises", frozenset({"exercises"})),
    ("host", frozenset({"host"})),
    ("rooms", ROOMS),
    ("kernel", KERNEL),
)
# Edges between two kernel folders (source, target): none today.
KERNEL_EDGES: frozenset[tuple[str, str]] = frozenset()
ROOT = "aitestbed"  # the package itself: __version__, importable by anyone

FACADES = frozenset({
    "poptorch", "popdist", "tensorflow_ipu",  # Graphcore (tensorflow_ipu is installed
                                              # as tensorflow.python.ipu)
    "sambaflow",
    "cerebras_pytorch", "cerebras_appliance",
    "cerebras",  # Release 2.10's names cerebras.pytorch, cerebras.appliance (aliases)
    "groqflow",
    "pyslurm",
})
# The facade-to-facade imports there are, each for a reason of the vendor's own API:
FACADE_EDGES: frozenset[tuple[str, str]] = frozenset({
    ("popdist", "poptorch"),                  # popdist.poptorch.Options, as Graphcore's
    ("cerebras_pytorch", "cerebras_appliance"),  # the appliance's errors and environment
    ("cerebras", "cerebras_pytorch"),         # cerebras.pytorch is cerebras_pytorch
    ("cerebras", "cerebras_appliance"),       # cerebras.appliance is cerebras_appliance
})

# Circles in code that is being restructured, each declared with who breaks it (issue
# 47). A circle found among exactly these modules, or fewer, passes; one module more and
# the check fails. Remove the entry when the circle is gone (a test says so).
OPEN_CIRCLES: dict[str, frozenset[str]] = {}


# --- reading the imports --------------------------------------------------------------

@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: str    # relative to the repository
    line: int
    how: str     # "import", "lazy" (inside a function), "type" (TYPE_CHECKING), "string"

    def __str__(self) -> str:
        how = "" if self.how == "import" else f", {self.how}"
        return f"{self.source} ({self.path}:{self.line}{how}) -> {self.target}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(EMULATOR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def sources() -> dict[str, Path]:
    """Every module of emulator/ by name (the egg-info is no package)."""
    return {module_name(p): p for p in sorted(EMULATOR.rglob("*.py"))
            if not any(part.endswith(".egg-info") for part in p.parts)}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level_names(tree: ast.AST) -> set[str]:
    """What a module binds at its top level, in if/try/with blocks too (an entry
    string's attribute must be one); not what its functions and classes bind inside."""
    names: set[str] = set()
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.ExceptHandler):
            names |= _top_level_names(node)
    return names


@cache
def _bound_names(module: str) -> frozenset[str]:
    path = sources().get(module)
    if path is None:
        return frozenset()
    return frozenset(_top_level_names(ast.parse(path.read_text(), str(path))))


def read_imports(text: str, module: str, is_package: bool, known: set[str] | dict,
                 bound=_bound_names) -> Iterator[tuple[str, int, str]]:
    """(target, line, how) for every import of one module's source text; `known` holds
    the module names of emulator/, `bound(module)` the names a module binds."""
    package = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST, how: str) -> Iterator[tuple[str, int, str]]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, how
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            from_module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                child = f"{from_module}.{alias.name}"
                yield (child if child in known else from_module), node.lineno, how
        elif isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                node.func, "id", "")
            first = node.args[0] if node.args else None
            if (name in ("import_module", "__import__") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str) and not first.value.startswith(".")):
                yield first.value, node.lineno, "string"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            entry = ENTRY.fullmatch(node.value)
            if (entry and entry[1] in known and entry[1] != module
                    and entry[2] in bound(entry[1])):
                yield entry[1], node.lineno, "string"
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, "type")
            for child in node.orelse:
                yield from visit(child, how)
            return
        inner = "lazy" if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                     ) and how == "import" else how
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(ast.parse(text), "import")


@cache
def edges() -> tuple[Edge, ...]:
    root = EMULATOR.parent
    found = []
    for module, path in sources().items():
        for target, line, how in read_imports(path.read_text(), module,
                                              path.name == "__init__.py", sources()):
            found.append(Edge(module, target, str(path.relative_to(root)), line, how))
    return tuple(found)


# --- the layers -----------------------------------------------------------------------

def unit(module: str) -> str | None:
    """The folder (or facade) a module of emulator/ belongs to: "aitestbed" for the
    package itself, "aitestbed.<folder>" for its folders and cli, "<facade>"; None for a
    module outside emulator/ (the standard library, torch: no rule here)."""
    parts = module.split(".")
    if parts[0] == ROOT:
        return ROOT if len(parts) == 1 else f"{ROOT}.{parts[1]}"
    return parts[0] if parts[0] in _top_level() | FACADES else None


@cache
def _top_level() -> frozenset[str]:
    return frozenset(name.split(".")[0] for name in sources())


def layer(folder: str) -> int | None:
    """How deep an aitestbed folder's layer is (0: cli); None if no layer names it."""
    name = folder.removeprefix(f"{ROOT}.")
    for depth, (_, folders) in enumerate(LAYERS):
        if name in folders:
            return depth
    return None


def declared(unit_name: str) -> bool:
    if unit_name == ROOT or unit_name in FACADES:
        return True
    return unit_name.startswith(f"{ROOT}.") and layer(unit_name) is not None


def allowed(source: str, target: str) -> bool:
    """May a module of unit `source` import one of unit `target`? (Units from unit().)"""
    if target is None or source == target:
        return True
    if not (declared(source) and declared(target)):
        return False
    if target == ROOT:
        return True
    if source == ROOT:
        return False
    if source in FACADES:
        if target in FACADES:
            return (source, target) in FACADE_EDGES
        return target.removeprefix(f"{ROOT}.") in ROOMS | KERNEL
    if target in FACADES:
        return False  # never aitestbed -> a facade
    here, there = source.removeprefix(f"{ROOT}."), target.removeprefix(f"{ROOT}.")
    if here in ROOMS and there in ROOMS:
        return False
    if here in KERNEL and there in KERNEL:
        return (here, there) in KERNEL_EDGES
    return layer(target) > layer(source)


def test_the_walk_sees_the_package_and_every_kind_of_import():
    seen = {edge.source for edge in edges()}
    assert {"aitestbed.cli", "aitestbed.host.state", "aitestbed.graphcore.ipu",
            "aitestbed.sambanova.snd.server", "aitestbed.cerebras.agent",
            "aitestbed.node.init", "poptorch._runtime", "tensorflow_ipu._keras",
            "cerebras.pytorch"} <= seen
    kinds = {(e.source, e.target): e.how for e in edges()}
    assert kinds[("cerebras_pytorch.appliance.runner",
                  "cerebras_pytorch.appliance.kubernetes_runner")] == "string"
    assert kinds[("groqflow.justgroqit.groqit", "groqflow.groqmodel.groqmodel")] == "lazy"
    assert kinds[("aitestbed.host.passcode", "aitestbed.host.state")] == "type"


def test_every_folder_and_facade_is_declared():
    undeclared = sorted(f"emulator/{name.replace('.', '/')}"
                        for name in {unit(module) for module in sources()} if not declared(name))
    assert undeclared == [], (
        f"{', '.join(undeclared)}: in no layer. Declare a folder of emulator/aitestbed in "
        f"LAYERS, a vendor facade in FACADES (and its imports of other facades in "
        f"FACADE_EDGES), in {HERE}; and say where it sits in docs/architecture.md.")


def test_no_import_runs_upward_or_across_rooms_or_facades():
    wrong = [str(edge) for edge in edges() if not allowed(unit(edge.source), unit(edge.target))]
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
    # cli > classroom > exercises > host
    ("aitestbed.cli", "aitestbed.classroom.cli", True),
    ("aitestbed.classroom.load", "aitestbed.exercises.guide", True),
    ("aitestbed.exercises.guide", "aitestbed.classroom.load", False),
    ("aitestbed.exercises.probe", "aitestbed.host.state", True),
    ("aitestbed.host.lifecycle", "aitestbed.exercises.probe", False),
    ("aitestbed.host.lifecycle", "aitestbed.classroom.room", False),
    ("aitestbed.host.systems.cerebras", "aitestbed.cerebras.cs3", True),
    ("aitestbed.host.images", "aitestbed.datasets.mnist", True),
    # the kernel: nothing above it, and its folders not one another
    ("aitestbed.node.init", "aitestbed.cerebras.node_setup", False),
    ("aitestbed.node.daemon", "aitestbed.devices.base", False),
    ("aitestbed.datasets.mnist", "aitestbed.node.processes", False),
    ("aitestbed.devices.base", "aitestbed", True),  # the package: anyone
    # the facades
    ("popdist.poptorch", "poptorch.options", True),
    ("poptorch.options", "popdist.poptorch", False),
    ("cerebras.pytorch", "cerebras_pytorch._alias", True),
    ("cerebras_pytorch.appliance.errors", "cerebras_appliance.errors", True),
    ("cerebras_appliance.errors", "cerebras_pytorch.appliance.errors", False),
    ("groqflow.justgroqit.groqit", "cerebras_pytorch.backend", False),
    ("groqflow.justgroqit.groqit", "aitestbed.groq.timing", True),
    ("cerebras_pytorch.appliance.worker", "aitestbed", True),
    ("aitestbed.host.systems.cerebras", "cerebras_pytorch.appliance", False),
    # a folder no layer names, as source or target
    ("aitestbed.newfolder.thing", "aitestbed.node.processes", False),
    ("aitestbed.host.state", "aitestbed.newfolder.thing", False),
    ("aitestbed.host.state", "torch", True),
])
def test_the_rule_itself(source, target, ok):
    assert allowed(unit(source), unit(target)) is ok


def test_an_unknown_folder_is_in_no_layer():
    assert not declared("aitestbed.newfolder")
    assert declared("aitestbed.host") and declared("groqflow") and declared(ROOT)


# --- circles ----------------------------------------------------------------------------

def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a module that
    imports itself), each sorted; Tarjan's algorithm, without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))
    return found


def one_circle(component: list[str], links: dict[tuple[str, str], Edge]) -> list[Edge]:
    """The shortest way from the component's first module back to itself, edge by edge."""
    members, start = set(component), component[0]
    following: dict[str, list[str]] = {}
    for source, target in sorted(links):
        if source in members and target in members:
            following.setdefault(source, []).append(target)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        reached = []
        for node in frontier:
            for target in following.get(node, []):
                if target == start:
                    path = [node]
                    while path[0] != start:
                        path.insert(0, came[path[0]])
                    return [links[pair] for pair in zip(path, [*path[1:], start], strict=True)]
                if target not in came:
                    came[target] = node
                    reached.append(target)
        frontier = reached
    raise AssertionError(f"no circle through {start}")  # a component always has one


def running_graph(found: Iterable[Edge]) -> tuple[dict[str, set[str]], dict]:
    known = sources()
    graph: dict[str, set[str]] = {module: set() for module in known}
    links: dict[tuple[str, str], Edge] = {}
    for edge in found:
        if edge.how != "type" and edge.target in known and edge.target != edge.source:
            graph[edge.source].add(edge.target)
            links.setdefault((edge.source, edge.target), edge)
    return graph, links


def test_no_import_closes_a_circle():
    graph, links = running_graph(edges())
    reports = []
    for component in circles(graph):
        if any(set(component) <= modules for modules in OPEN_CIRCLES.values()):
            continue
        steps = one_circle(component, links)
        reports.append(f"{len(component)} modules in a circle ({', '.join(component)}); "
                       "one way round:\n    " + "\n    ".join(map(str, steps)))
    assert not reports, "\n".join(reports)


@pytest.mark.parametrize("name", sorted(OPEN_CIRCLES))
def test_a_declared_open_circle_is_still_there(name):
    graph, _ = running_graph(edges())
    assert any(set(c) & OPEN_CIRCLES[name] for c in circles(graph)), (
        f"the circle {name!r} is gone: remove it from OPEN_CIRCLES in {HERE}")


def test_the_circle_finder_itself():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["e"]]
    links = {(s, t): Edge(s, t, f"{s}.py", 1, "import") for s in graph for t in graph[s]}
    assert [(e.source, e.target) for e in one_circle(["a", "b", "c"], links)] == [
        ("a", "b"), ("b", "c"), ("c", "a")]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_lazy_type_only_and_string_imports_are_read():
    text = '''
import importlib
from typing import TYPE_CHECKING
from . import sibling, helper
if TYPE_CHECKING:
    from pkg.other import Thing
RUNNER = "pkg.other:Runner"
LOG = "pkg.other:cpp"

def later():
    from pkg.other import Runner
    return importlib.import_module("pkg.plugin")
'''
    known = {"pkg", "pkg.mod", "pkg.sibling", "pkg.other", "pkg.plugin"}
    found = set(read_imports(text, "pkg.mod", False, known,
                             bound=lambda m: {"Runner", "Thing"} if m == "pkg.other" else set()))
    assert found == {("importlib", 2, "import"), ("typing", 3, "import"),
                     ("pkg.sibling", 4, "import"), ("pkg", 4, "import"),
                     ("pkg.other", 6, "type"), ("pkg.other", 7, "string"),
                     ("pkg.other", 11, "lazy"), ("pkg.plugin", 12, "string")}
