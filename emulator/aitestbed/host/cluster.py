"""One cluster, opened once: its state directory, its record, its topology (the record's
profile and systems read through the inventory) and the provider it runs on.

`Cluster.open(name)` is how everything after `up` finds a cluster (an AitestbedError saying
how to make it when there is none); `Cluster.for_up` is `up`'s: the record a new cluster
starts from, or the existing one, with what `up` was asked checked against it. The
topology and the provider are made when first used (reading the inventory runs
ansible-inventory; a provider only connects when asked something).
"""

from __future__ import annotations

from functools import cached_property

from aitestbed.host import provider as providers
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import PROFILE_ALIASES, Topology
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.provider import Provider
from aitestbed.host.state import ClusterRecord, ClusterState


class Cluster:
    """A cluster's state, record, topology and provider."""

    def __init__(self, state: ClusterState, record: ClusterRecord,
                 topology: Topology | None = None, provider: Provider | None = None):
        self.state = state
        self.record = record
        self.fresh = False  # made by this `up` (no Slurm controller of it has any job yet)
        if topology is not None:
            self.topology = topology
        if provider is not None:
            self.provider = provider

    @classmethod
    def open(cls, name: str) -> Cluster:
        """The cluster `up` made (an AitestbedError naming `up` when there is none)."""
        state = ClusterState(name)
        return cls(state, state.load())

    @classmethod
    def exists(cls, name: str) -> bool:
        return ClusterState(name).exists()

    @classmethod
    def for_up(cls, name: str, profile: str | None, systems: list[str] | None, user: str,
               provider: str | None = None, provider_options: dict | None = None) -> Cluster:
        """The cluster `up` works on: a new record, or the existing one when what `up` was
        given agrees with it (else an AitestbedError: destroy it first or choose another
        name). Provider options may still change while the provider holds no node of it
        (an `up` that stopped before making any)."""
        state = ClusterState(name)
        fresh = not state.exists()
        record = record_for_up(state, profile, systems, user)
        options = {k: v for k, v in (provider_options or {}).items() if v is not None}
        if fresh and provider:
            record.provider = provider
            record.provider_options = options
        if provider and provider != record.provider:
            raise AitestbedError(
                f"cluster {name!r} runs on the {record.provider} provider: destroy it first or "
                "choose another --name")
        changed = {k for k, v in options.items() if record.provider_options.get(k) != v}
        if changed and not _has_nodes(record):
            # An `up` that stopped before making any node (a registry it could not push
            # to): the next one may name other options.
            record.provider_options = {**record.provider_options, **options}
            changed = set()
        if changed:
            raise AitestbedError(
                f"cluster {name!r} was made with other provider options "
                f"({', '.join(f'{k}={record.provider_options.get(k)}' for k in sorted(changed))}"
                "): destroy it first or choose another --name")
        cluster = cls(state, record)
        cluster.fresh = fresh
        return cluster

    @property
    def name(self) -> str:
        return self.state.name

    @cached_property
    def topology(self) -> Topology:
        return load_inventory(self.record.profile, self.record.systems)

    @cached_property
    def provider(self) -> Provider:
        return providers.get(self.record.provider, **self.record.provider_options)

    def save(self) -> None:
        """Keep the record (written only when it changed)."""
        if self.state.exists() and self.state.load() == self.record:
            return
        self.state.save(self.record)

    def sync_files(self, nodes: list[str] | None = None) -> None:
        """The nodes (these, or all) see the state directory's files as they are now."""
        self.provider.sync_files(self, nodes)

    def prepare(self) -> None:
        """The state directory's files for this topology and record, the rendered
        inventory reaching each node as its provider says."""
        reach = {n.name: self.provider.ansible_vars(self.name, n.name)
                 for n in self.topology.nodes}
        self.state.prepare(self.topology, self.record, reach)


def _has_nodes(record: ClusterRecord) -> bool:
    """Does the record's provider hold any node of it (True when it cannot tell)?"""
    try:
        return bool(providers.get(record.provider, **record.provider_options).nodes(record.name))
    except AitestbedError:
        return True


def record_for_up(state: ClusterState, profile: str | None, systems: list[str] | None,
            user: str) -> ClusterRecord:
    """The existing record, when `profile` and `systems` agree with it; else a new one."""
    if state.exists():
        record = state.load()
        if profile and PROFILE_ALIASES.get(profile, profile) not in (record.profile,
                                                                      record.inventory):
            raise AitestbedError(
                f"cluster {state.name!r} was created with profile {record.profile!r}: "
                f"destroy it first or choose another --name"
            )
        if systems and sorted(systems) != sorted(record.systems or []):
            raise AitestbedError(
                f"cluster {state.name!r} was created with systems "
                f"{','.join(record.systems) if record.systems else 'all'}: destroy it first or "
                "choose another --name"
            )
        return record
    return ClusterRecord(name=state.name, profile=PROFILE_ALIASES.get(profile, profile or "alcf"),
                         inventory="",
                         systems=systems, user=user, storage="")
