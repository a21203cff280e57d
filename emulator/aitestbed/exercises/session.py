"""One cluster's exercises for one learner: who they are, what they started, what passed.

Each learner's record is ClusterState(name).root/exercises/<user>.json (when
they started and first passed each exercise); data-transfer's file to copy is
<user>-payload.txt beside it.
"""

from __future__ import annotations

import datetime
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from aitestbed.exercises import catalog
from aitestbed.exercises.catalog import Exercise
from aitestbed.exercises.checks import Context, Criterion, Nodes
from aitestbed.exercises.probe import NodeProbe, Probe
from aitestbed.host.cluster import Cluster
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Topology


def nodes_of(topology: Topology) -> Nodes:
    """The cluster's nodes by the role they play for a learner."""
    def by_system(keep) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for node in topology.nodes:
            if keep(node):
                grouped.setdefault(node.system, []).append(node.name)
        return grouped

    return Nodes(
        login=by_system(lambda n: n.node_class == "login"),
        hop=by_system(lambda n: n.node_class in ("ipu_node", "rdu_node") and n.ssh_allow_groups),
        controllers=by_system(lambda n: n.node_class == "slurmctld"),
        management=[n.name for n in topology.nodes if "kube-apiserver" in n.services],
        mfa=frozenset(n.name for n in topology.nodes if n.ssh_mfa),
    )


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Result:
    exercise: Exercise
    user: str
    criteria: list[Criterion]

    @property
    def passed(self) -> bool:
        return all(c.done for c in self.criteria)


class ClusterView:
    """An opened cluster (its state, record and topology) and the probe that looks at its
    nodes (NodeProbe unless given): what a learner's Session and the classroom share."""

    def __init__(self, cluster: str, probe: Probe | None = None):
        opened = Cluster.open(cluster)
        self.state, self.record, self.topology = opened.state, opened.record, opened.topology
        self._probe = probe

    @property
    def probe(self) -> Probe:
        if self._probe is None:
            self._probe = NodeProbe(self.state.name)
        return self._probe


class Session(ClusterView):
    def __init__(self, cluster: str, probe: Probe | None = None):
        super().__init__(cluster, probe)
        self.nodes = nodes_of(self.topology)

    @property
    def exercises(self) -> list[Exercise]:
        return catalog.available(self.topology.systems)

    def exercise(self, name: str) -> Exercise:
        found = catalog.by_name(name)
        if found is None:
            raise AitestbedError(f"no exercise {name!r}: `aitestbed exercise list` shows them")
        if found not in self.exercises:
            raise AitestbedError(f"exercise {name!r} needs the {found.system} system, which "
                                 f"cluster {self.state.name!r} does not have")
        return found

    # learners -----------------------------------------------------------------
    def accounts(self) -> dict:
        """The cluster's accounts.json: groups, projects and users."""
        path = self.state.common_dir / "accounts.json"
        try:
            accounts = json.loads(path.read_text())
        except (OSError, ValueError):
            accounts = None
        if not isinstance(accounts, dict) or not isinstance(accounts.get("users"), list):
            raise AitestbedError(f"cluster {self.state.name!r} has no account list ({path}): "
                                 f"run `aitestbed --name {self.state.name} up`")
        return accounts

    def users(self) -> list[dict]:
        return self.accounts()["users"]

    def learner(self, name: str | None) -> tuple[str, int]:
        """(user, uid); the practice user by default."""
        name = name or self.record.user
        users = {u["name"]: u for u in self.users()}
        if name not in users:
            raise AitestbedError(f"no user {name!r} on cluster {self.state.name!r}: its users "
                                 f"are {', '.join(sorted(users))}")
        if not users[name].get("active", True):
            raise AitestbedError(f"user {name!r} was offboarded from cluster "
                                 f"{self.state.name!r}")
        return name, int(users[name]["uid"])

    # records ------------------------------------------------------------------
    @property
    def records_dir(self) -> Path:
        return self.state.root / "exercises"

    def payload_path(self, user: str) -> Path:
        return self.records_dir / f"{user}-payload.txt"

    def _record(self, user: str) -> dict:
        path = self.records_dir / f"{user}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {"started": {}, "passed": {}}

    def _save(self, user: str, record: dict) -> None:
        self.records_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.records_dir / f"{user}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(path)

    def progress(self, user: str) -> dict:
        return self._record(user)

    def values(self, user: str) -> dict[str, str]:
        payload = self.payload_path(user)
        return catalog.placeholders(self.state.name, user, str(self.state.ssh_config_path),
                                    self.nodes, str(payload) if payload.is_file() else "")

    # start and check ------------------------------------------------------------
    def start(self, exercise: Exercise, user: str) -> None:
        """Record the start; data-transfer gets a fresh file to copy."""
        if exercise.name == "data-transfer":
            payload = self.payload_path(user)
            payload.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            payload.write_text(f"aitestbed data-transfer exercise for {user}: "
                               f"{secrets.token_hex(16)}\n")
        record = self._record(user)
        record["started"][exercise.name] = now()
        self._save(user, record)

    def context(self, user: str, uid: int) -> Context:
        payload = self.payload_path(user)
        return Context(self.probe, user, uid, self.nodes,
                       payload=payload.read_text() if payload.is_file() else None,
                       payload_name=payload.name)

    def check(self, exercise: Exercise, user: str, uid: int) -> Result:
        values = self.values(user)
        criteria = exercise.check(self.context(user, uid))
        for criterion in criteria:
            criterion.hint = catalog.fill(criterion.hint, values)
        result = Result(exercise, user, criteria)
        if result.passed:
            record = self._record(user)
            record["passed"].setdefault(exercise.name, now())
            self._save(user, record)
        return result
