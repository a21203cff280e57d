"""`up` tells each Slurm controller which of its compute nodes it (re)starts (A7)."""

from aitestbed.host import inventory, lifecycle
from aitestbed.host.provider import ExecResult


def test_only_restarted_compute_nodes_are_reported_to_their_own_controller():
    topology = inventory.load("mini")
    computes = {n.name for n in topology.nodes if "slurm_gres" in topology.hostvars[n.name]}
    everything = {n.name for n in topology.nodes}
    restarts = lifecycle.slurm_restarts(topology, everything)
    assert sorted(restarts) == sorted(n.name for n in topology.nodes
                                      if n.node_class == "slurmctld")
    assert sorted(n for nodes in restarts.values() for n in nodes) == sorted(computes)
    for controller, nodes in restarts.items():
        cluster = topology.node(controller).slurm_cluster
        assert all(topology.node(n).slurm_cluster == cluster for n in nodes)
    # A login node or a controller starting alone has no jobs to settle.
    others = everything - computes
    assert lifecycle.slurm_restarts(topology, others) == {}


class FakeProvider:
    """Answers each exec with the next (exit code, output)."""

    def __init__(self, results):
        self.results, self.calls = results, []

    def exec(self, cluster, node, argv, user=None, workdir=None, separate=False):
        self.calls.append((node, argv))
        code, output = self.results.pop(0)
        return ExecResult(code, output, b"")


def test_mark_down_retries_until_slurmctld_answers(monkeypatch):
    provider = FakeProvider([(1, b"slurm_update error: Unable to contact slurm controller"),
                             (0, b"")])
    monkeypatch.setattr(lifecycle.time, "sleep", lambda s: None)
    assert lifecycle.mark_down(provider, "t", "gc-slurmctld", ["gc-poplar-01", "gc-poplar-02"]) \
        is None
    assert provider.calls[-1] == ("gc-slurmctld", [
        "scontrol", "update", "nodename=gc-poplar-01,gc-poplar-02", "state=down",
        "reason=restarted by aitestbed up"])


def test_mark_down_gives_up_with_a_warning(monkeypatch):
    provider = FakeProvider([(1, b"Unable to contact slurm controller")] * 3)
    monkeypatch.setattr(lifecycle.time, "sleep", lambda s: None)
    warning = lifecycle.mark_down(provider, "t", "sn30-slurmctld", ["sn30-r1-h1"], timeout=0)
    assert "could not tell sn30-slurmctld that sn30-r1-h1 restarted" in warning


def test_nodes_get_half_the_hosts_memory_as_dev_shm(tmp_path):
    """Docker's 64 MB /dev/shm kills a DataLoader's workers (Bus error); nodes get what
    Linux gives a host: half its memory."""
    from aitestbed.host.provider.docker import shm_bytes

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:        1000 kB\n")
    assert shm_bytes(meminfo) == 24576000 * 1024 // 2
    assert shm_bytes(tmp_path / "missing") == 1 << 30
