"""`up`, `down` and `destroy` (host/lifecycle) against a fake provider that holds its
nodes in a dict: no engine, no containers. The state directory, the inventory and the
record are the real ones (profile mini, its Graphcore nodes)."""

from __future__ import annotations

import json

import pytest
from aitestbed.host import lifecycle
from aitestbed.host import provider as providers
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider.base import ExecResult, NodeHandle, Provider, Provisioned
from aitestbed.host.state import ClusterState

NAME = "fake-1"
SYSTEMS = ["graphcore"]


class FakeProvider(Provider):
    """Nodes as {name: [status, image]}; every call that changes something is logged."""

    name = "fake"

    def __init__(self):
        self.held: dict[str, list[str]] = {}
        self.owner: str | None = None  # what `holder` says while nothing is held
        self.remake: set[str] = set()  # nodes it cannot keep as they were made
        self.volumes: set[str] = set()
        self.log: list[tuple] = []
        self.execs: list[tuple[str, list[str]]] = []

    def check(self) -> None:
        pass

    def provision(self, cluster) -> Provisioned:
        self.ensure_network(cluster.name, cluster.topology)
        self.ensure_volumes(cluster)
        return Provisioned([], ["fake storage"])

    def ensure_images(self, node_classes: list[str]) -> dict[str, str]:
        return {c: f"{c}:1" for c in node_classes}

    def holder(self, cluster) -> str | None:
        return self.owner

    def ensure_network(self, cluster, topology) -> list[str]:
        return []

    def ensure_volume(self, cluster, volume, mount) -> None:
        self.volumes.add(volume)

    def nodes(self, cluster) -> dict[str, NodeHandle]:
        return {n: NodeHandle(n, status, image, remake=n in self.remake)
                for n, (status, image) in self.held.items()}

    def create_node(self, cluster, node, image) -> None:
        self.log.append(("create", node.name))
        self.held[node.name] = ["created", image]

    def start_node(self, cluster, node) -> None:
        self.log.append(("start", node.name))
        self.held[node.name][0] = "running"

    def stop_nodes(self, cluster, nodes) -> None:
        for node in nodes:
            self.log.append(("stop", node))
            self.held[node][0] = "exited"

    def remove_nodes(self, cluster, nodes) -> None:
        for node in nodes:
            self.log.append(("remove", node))
            self.held.pop(node, None)
            self.remake.discard(node)

    def exec(self, cluster, node, argv, user=None, workdir=None, separate=False):
        self.execs.append((node, argv))
        return ExecResult(0, b"", b"")

    def logs(self, cluster, node, tail=5) -> str:
        return ""

    def terminal_argv(self, cluster, node, argv, tty, user=None) -> list[str]:
        return argv

    def ansible_vars(self, cluster, node) -> dict:
        return {"ansible_connection": "fake", "ansible_host": node}

    def destroy(self, cluster) -> list[str]:
        removed = [f"{len(self.held)} fake nodes"] if self.held else []
        self.held.clear()
        return removed


@pytest.fixture
def fake(isolated_state, monkeypatch) -> FakeProvider:
    made = FakeProvider()
    # every provider is the fake: a cluster not made yet is Docker's (`destroy`)
    monkeypatch.setattr(providers, "get", lambda name="docker", **options: made)
    return made


def _up(**kwargs) -> lifecycle.UpResult:
    return lifecycle.up(NAME, "mini", SYSTEMS, "alice", provider="fake", timeout=10, **kwargs)


def _state_files(state: ClusterState) -> dict:
    return {p: p.read_bytes() for p in state.root.rglob("*") if p.is_file()}


def test_a_fresh_up_makes_and_starts_every_node(fake):
    result = _up()
    nodes = [n.name for n in result.topology.nodes]
    assert nodes and {n.system for n in result.topology.nodes} == {"graphcore"}
    assert sorted(fake.log) == sorted([("create", n) for n in nodes] +
                                      [("start", n) for n in nodes])
    assert all(status == "running" for status, _ in fake.held.values())
    assert result.outdated == [] and result.replaced == [] and result.notes == ["fake storage"]
    record = ClusterState(NAME).load()
    assert (record.provider, record.profile, record.systems) == ("fake", "mini", SYSTEMS)
    assert record.inventory.endswith("mini.yml")
    assert "ansible_connection: fake" in ClusterState(NAME).inventory_path.read_text()
    # a new cluster's controllers have no job yet: none was told of a restart
    assert not [argv for _, argv in fake.execs if argv[0] == "scontrol"]


def test_a_second_up_changes_nothing(fake):
    _up()
    state = ClusterState(NAME)
    before = _state_files(state)
    fake.log.clear()
    result = _up()
    assert fake.log == []
    assert _state_files(state) == before
    assert result.outdated == []


def test_down_then_up_restarts_the_nodes_the_controllers_were_told_about(fake):
    result = _up()
    nodes = {n.name for n in result.topology.nodes}
    fake.execs.clear()
    assert lifecycle.down(NAME) == len(nodes)
    assert all(status == "exited" for status, _ in fake.held.values())
    told = [argv for _, argv in fake.execs if argv[0] == "scontrol"]
    assert told and all("reason=stopped by aitestbed down" in argv for argv in told)
    marked = ClusterState(NAME).root / lifecycle.MARKED_DOWN
    assert json.loads(marked.read_text())
    fake.log.clear()
    fake.execs.clear()
    _up()
    assert sorted(fake.log) == sorted(("start", n) for n in nodes)  # none made again
    assert not marked.exists()
    # `down` told them already: no controller hears of a restart again
    assert not [argv for _, argv in fake.execs if argv[0] == "scontrol"]


def test_nodes_stopped_behind_ups_back_make_their_controller_hear_first(fake):
    _up()
    for held in fake.held.values():  # an engine restart: nobody told slurmctld
        held[0] = "exited"
    fake.execs.clear()
    _up()
    restarted = [argv for _, argv in fake.execs if argv[0] == "scontrol"]
    assert restarted and all("reason=restarted by aitestbed up" in argv for argv in restarted)


def test_an_outdated_node_is_reported_or_with_recreate_replaced(fake):
    _up()
    node = next(iter(fake.held))
    fake.held[node][1] = "old:0"
    assert _up().outdated == [node]
    fake.log.clear()
    result = _up(recreate=True)
    assert result.replaced == [node] and result.outdated == []
    assert ("remove", node) in fake.log and ("create", node) in fake.log
    assert fake.held[node][1] != "old:0"


def test_a_records_profile_or_systems_are_not_changed_by_a_later_up(fake):
    _up()
    with pytest.raises(AitestbedError, match="cluster 'fake-1' was created with profile 'mini': "
                                             "destroy it first or choose another --name"):
        lifecycle.up(NAME, "alcf", SYSTEMS, "alice", timeout=10)
    with pytest.raises(AitestbedError, match="cluster 'fake-1' was created with systems "
                                             "graphcore: destroy it first or choose another "
                                             "--name"):
        lifecycle.up(NAME, "mini", ["groq"], "alice", timeout=10)
    with pytest.raises(AitestbedError, match="runs on the fake provider: destroy it first"):
        lifecycle.up(NAME, "mini", SYSTEMS, "alice", provider="docker", timeout=10)


def test_destroy_removes_the_nodes_and_the_state(fake):
    _up()
    state = ClusterState(NAME)
    removed = lifecycle.destroy(NAME)
    assert removed[0].endswith("fake nodes") and removed[-1] == f"state {state.root}"
    assert fake.held == {} and not state.root.exists()
    with pytest.raises(AitestbedError, match="there is no cluster named 'fake-1'"):
        lifecycle.destroy(NAME)


def test_up_never_takes_a_cluster_of_that_name_it_has_no_record_of(fake):
    """One engine serves every member of `docker`: Bob's `up` of the name Alice's cluster has
    refuses before it makes or saves anything, naming her; so does an `up` whose own state
    directory went (its containers are removed by hand, never adopted)."""
    state = ClusterState(NAME)
    fake.owner = "alice (uid 1001)"
    with pytest.raises(AitestbedError, match=r"a cluster named 'fake-1' on this Docker engine "
                       r"belongs to alice \(uid 1001\): choose another --name"):
        _up()
    fake.owner = lifecycle.owner()
    with pytest.raises(AitestbedError, match=r"that you have no record of \(was .*fake-1 "
                       r"removed\?\).*label aitestbed.cluster=fake-1"):
        _up()
    fake.owner = ""  # made before clusters carried their owner
    with pytest.raises(AitestbedError, match="that you have no record of"):
        _up()
    assert fake.log == [] and not state.exists()
    # this user's own cluster, with its record, is theirs to bring up again
    fake.owner = None
    _up()
    fake.owner = "alice (uid 1001)"
    fake.log.clear()
    _up()
    assert fake.log == []


def test_a_node_its_provider_cannot_keep_is_made_again_by_up_and_only_it(fake):
    """Docker's login nodes made before the gate published their own ssh: the next `up`
    removes and makes them again (their volumes stay), the rest untouched."""
    result = _up()
    login = next(n.name for n in result.topology.nodes if n.ssh_publish)
    fake.remake.add(login)
    fake.log.clear()
    _up()
    assert fake.log == [("remove", login), ("create", login), ("start", login)]
    assert fake.held[login][0] == "running" and not fake.remake
