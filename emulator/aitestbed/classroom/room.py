"""The classroom's changes to a running cluster: create, sheets, begin, reset, destroy.

Accounts go through the existing account playbooks (onboard-user, offboard-user), once
for the whole room. Homes are snapshotted and restored on the shared /home by root on
one node, as the learner wherever the learner's files are written (`runuser`), so a
learner's links are archived as links and never followed by root.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shlex
import socket
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from aitestbed.classroom import roster
from aitestbed.classroom.roster import ClassroomError, Room
from aitestbed.exercises import catalog
from aitestbed.exercises.probe import Probe
from aitestbed.exercises.session import ClusterView
from aitestbed.host.cluster import Cluster
from aitestbed.host.inventory import Topology, ansible_source
from aitestbed.host.jobrun.plan import PlanError, human_size, parse_size
from aitestbed.host.playbook import run_playbook
from aitestbed.host.state import ClusterState

# On the shared /home, root-only: each learner's snapshots and the archives of resets.
ARCHIVE = "/home/.classroom"
# The most data (real blocks, not apparent sizes) a classroom archive takes of one home
# (AITESTBED_CLASSROOM_ARCHIVE_CAP, e.g. 5G): root makes the archives, outside any
# learner's quota. tar --sparse reads a sparse file's data only, so `truncate -s 100G`
# costs nothing; a home over the cap is not archived, and the command says so (begin),
# refuses (reset) or leaves the home in place (destroy).
ARCHIVE_CAP_ENV = "AITESTBED_CLASSROOM_ARCHIVE_CAP"
ARCHIVE_CAP = "2G"
OVER_CAP = "aitestbed-over-cap"
CREATED = "created"


def _today() -> dt.date:
    return dt.date.today()


def _stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


# the account playbooks, once for many -------------------------------------------------
def run_account_playbook(state: ClusterState, playbook: str, names: list[str],
                         accounts_vars: dict | None = None, what: str = "") -> None:
    """One run of playbooks/<playbook>.yml for all `names` (its log in the state dir)."""
    cluster = Cluster.open(state.name)
    topology = cluster.topology
    profile = ansible_source(topology.inventory_path, state.root / "profile-inventory")
    directory = roster.room_dir(state.root)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    extra = [f"user={','.join(names)}"]
    with tempfile.NamedTemporaryFile("w", suffix=".yml", dir=directory, delete=True) as f:
        if accounts_vars is not None:
            yaml.safe_dump(accounts_vars, f)
            f.flush()
            extra.append(f"@{f.name}")
        log = directory / f"{playbook}.log"
        result = run_playbook(playbook, [profile, state.inventory_path], extra_vars=extra,
                              limit=",".join([*(n.name for n in topology.nodes), "localhost"]),
                              log=log)
    # The accounts' files in the state directory, on nodes that do not bind it.
    cluster.sync_files()
    if result.returncode:
        raise ClassroomError(f"{what or playbook} failed: {_failure(log)} (the whole log: {log})")


def _failure(log: Path) -> str:
    """The first failed task's message in an ansible-playbook log."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "see the log"
    for line in lines:
        if line.startswith(("fatal:", "failed:")) and '"msg":' in line:
            found = _field(line, "stderr") or _field(line, "msg")
            if found:
                return found[:300]
    return "see the log"


def _field(line: str, key: str) -> str:
    """A string field of the JSON result on an ansible `fatal:` line ('' if none)."""
    try:
        start = line.index("{")
        return str(json.loads(line[start:line.rindex("}") + 1]).get(key) or "").strip()
    except (ValueError, AttributeError):
        marker = f'"{key}": "'
        return line.split(marker, 1)[1].split('", "', 1)[0] if marker in line else ""


def onboard(state: ClusterState, accounts_vars: dict, names: list[str]) -> None:
    run_account_playbook(state, "onboard-user", names, accounts_vars, "onboarding")


def offboard(state: ClusterState, names: list[str]) -> None:
    """Offboard `names` (their jobs cancelled, homes archived as account_policy says)."""
    run_account_playbook(state, "offboard-user", names, None, "offboarding")


# homes ----------------------------------------------------------------------------------
def home_node(topology: Topology) -> str:
    """A node with the shared /home (a login node: every cluster has one)."""
    for node in topology.nodes:
        if node.node_class == "login":
            return node.name
    raise ClassroomError("this cluster has no login node")


def _run(probe: Probe, node: str, command: str, what: str) -> str:
    rc, out = probe.run(node, command)
    if rc:
        raise ClassroomError(f"{what} failed on {node}: {out.strip()[-300:]}")
    return out


def archive_cap() -> int:
    text = os.environ.get(ARCHIVE_CAP_ENV) or ARCHIVE_CAP
    try:
        return parse_size(text)
    except PlanError as err:
        raise ClassroomError(f"{ARCHIVE_CAP_ENV}={text}: {err}") from None


def _capped(user: str, archive: str, whole: bool = False) -> str:
    """Shell: archive the user's home into `archive` (its contents, or with `whole` the
    directory itself; sparse-aware, numeric owners, links as links) unless its data is
    over ARCHIVE_CAP; then print `OVER_CAP user bytes` instead."""
    home = f"/home/{user}"
    what = f"-C /home {user}" if whole else f"-C {home} ."
    return (f"used=$(du -sx --block-size=1 -- {home} | cut -f1) && "
            f"if [ \"$used\" -gt {archive_cap()} ]; then echo {OVER_CAP} {user} $used; "
            f"else tar --sparse --numeric-owner -czf {archive} {what}; fi")


def over_cap(output: str) -> dict[str, int]:
    """{user: bytes of data} of the homes the archive commands left out."""
    found = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == OVER_CAP and words[2].isdigit():
            found[words[1]] = int(words[2])
    return found


def over_cap_line(user: str, used: int) -> str:
    return (f"{user}'s home holds {human_size(used)} of data, over the "
            f"{human_size(archive_cap())} a classroom archive takes "
            f"({ARCHIVE_CAP_ENV})")


def snapshot_homes(probe: Probe, node: str, users: list[str], label: str) -> dict[str, int]:
    """ARCHIVE/<user>/<label>.tar.gz of each home, made by root without following links
    (tar archives a link as a link) and reading only a sparse file's data; one command for
    the whole room. The homes over ARCHIVE_CAP are left out: {user: bytes of data}."""
    script = [f"umask 077 && install -d -m 0700 -o root -g root {ARCHIVE}"]
    for user in users:
        keep = f"{ARCHIVE}/{user}"
        # A new room's snapshots never mix with an earlier room's (its archives stay).
        fresh = f"rm -f {keep}/begin-*.tar.gz && " if label == CREATED else ""
        part = f"{keep}/{label}.tar.gz.tmp"
        script.append(
            f"install -d -m 0700 -o root -g root {keep} && {fresh}"
            f"rm -f {part} && {_capped(user, part)} && "
            f"{{ ! test -f {part} || mv -f {part} {keep}/{label}.tar.gz; }}")
    return over_cap(_run(probe, node, " && ".join(script), "the home snapshots"))


def snapshots(probe: Probe, node: str, user: str) -> list[str]:
    rc, out = probe.run(node, f"ls {ARCHIVE}/{shlex.quote(user)} 2>/dev/null")
    return sorted(n.removesuffix(".tar.gz") for n in out.split() if n.endswith(".tar.gz")) \
        if rc == 0 else []


def home_data(probe: Probe, node: str, user: str) -> int:
    """The bytes of data (real blocks) in the user's home."""
    out = _run(probe, node, f"du -sx --block-size=1 -- /home/{user} | cut -f1",
               f"measuring {user}'s home")
    return int(out.split()[0])


def restore_home(probe: Probe, node: str, user: str, label: str) -> str:
    """Archive the home as it is now, empty it and unpack `label` into it, both as the
    user; returns the archive's path. A home over ARCHIVE_CAP is left as it is (a
    ClassroomError): what it holds would be lost without its archive."""
    keep = f"{ARCHIVE}/{user}"
    archive = f"{keep}/reset-{_stamp()}.tar.gz"
    home = f"/home/{user}"
    as_user = f"runuser -u {user} --"
    out = _run(probe, node, " && ".join([
        f"umask 077 && test -f {keep}/{label}.tar.gz",
        _capped(user, archive),
        # Emptied and refilled by the learner's own uid: whatever links they planted, it
        # can only change what they could change themselves.
        f"{{ ! test -f {archive} || {{ {as_user} find {home} -mindepth 1 -maxdepth 1 "
        f"-exec rm -rf -- {{}} + && {as_user} tar -C {home} -xzf - < {keep}/{label}.tar.gz; }}; }}",
    ]), f"resetting {user}'s home")
    if used := over_cap(out).get(user):
        raise ClassroomError(f"{over_cap_line(user, used)}: not reset (make room, then reset)")
    return archive


# jobs ---------------------------------------------------------------------------------------
def cancel_jobs(probe: Probe, topology: Topology, users: list[str]) -> list[str]:
    """Cancel the users' Slurm jobs, wsjobs and PBS jobs on every system; what was done."""
    done = []
    names = " ".join(shlex.quote(u) for u in users)
    for node in topology.nodes:
        if node.node_class == "slurmctld":
            for user in users:
                probe.run(node.name, f"scancel --user {shlex.quote(user)} --full")
            done.append(f"Slurm jobs on {node.name}")
        if "kube-apiserver" in node.services:
            probe.run(node.name, "/opt/aitestbed/venv/bin/python -m "
                                 f"aitestbed.cerebras.cancel_wsjobs {names}")
            done.append(f"wsjobs on {node.name}")
        if node.node_class == "pbs_server":
            for user in users:
                probe.run(node.name, f"ids=$(qselect -u {shlex.quote(user)}) && "
                                     "[ -n \"$ids\" ] && qdel -W force $ids")
            done.append(f"PBS jobs on {node.name}")
    return done


def end_processes(probe: Probe, topology: Topology, user: str) -> str:
    """End the user's processes on every node (their ssh sessions close too)."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: probe.run(n.name, f"pkill -KILL -u {shlex.quote(user)} || true"),
                      topology.nodes))
    return f"processes on {len(topology.nodes)} nodes"


# the requests -----------------------------------------------------------------------------
class Classroom(ClusterView):
    """One cluster's classroom, as the CLI drives it."""

    @property
    def room(self) -> Room:
        room = roster.load_room(self.state.root)
        if room is None:
            raise ClassroomError(f"cluster {self.state.name!r} has no classroom: make one with "
                                 f"`aitestbed --name {self.state.name} classroom create "
                                 "--learners N`")
        return room

    def create(self, count: int, prefix: str, project: str, systems: list[str],
               listen: str | None = None, on_step: Callable[[str], None] = lambda s: None
               ) -> Room:
        roster.check_count(count)
        if listen is not None:
            listen = check_listen(listen, self.topology)
        with roster.exclusive(self.state.root, "classroom create"):
            existing = roster.load_room(self.state.root)
            if existing is not None:
                raise ClassroomError(
                    f"cluster {self.state.name!r} already has a classroom of "
                    f"{len(existing.learners)} learners ({existing.prefix}...): "
                    "`classroom destroy` it first")
            registry = self.state.registry()
            groups = dict(self._system_groups())
            room = roster.plan(count=count, prefix=prefix, project=project,
                               systems=systems, cluster_systems=list(self.topology.systems),
                               users=registry.users, projects=registry.projects,
                               system_groups=groups, today=_today())
            room.listen = None if listen in (None, LOOPBACK) else listen
            # Recorded first: if the playbook fails midway, `classroom destroy` finds what
            # it made.
            roster.save_room(self.state.root, room)
            on_step(f"onboarding {count} learners with one run of the onboarding playbook")
            try:
                onboard(self.state, roster.account_vars(room, self.record.user, _today()),
                        list(room.learners))
            except ClassroomError as err:
                raise ClassroomError(f"{err}; `classroom destroy` removes what was made") \
                    from None
            on_step("keeping each home as it is at creation (for `classroom reset`)")
            snapshot_homes(self.probe, home_node(self.topology), list(room.learners), CREATED)
            if room.listen:
                on_step(f"publishing the login nodes' ssh on {room.listen} (the cluster's "
                        "gate is made again)")
                publish(self.state, room.listen)
            return room

    def _system_groups(self) -> dict[str, int]:
        return dict(self.topology.common_vars["system_groups"])

    def begin(self, exercise: str) -> dict:
        """Snapshot every learner's home at the start of `exercise` (for reset --exercise):
        {"kept": learners, "left_out": a line per home over ARCHIVE_CAP}."""
        found = catalog.by_name(exercise)
        if found is None or found not in catalog.available(self.topology.systems):
            raise ClassroomError(f"no exercise {exercise!r} on this cluster: `aitestbed "
                                 "exercise list` shows them")
        with roster.exclusive(self.state.root, "classroom begin"):
            room = self.room
            left_out = snapshot_homes(self.probe, home_node(self.topology), list(room.learners),
                                      f"begin-{exercise}")
            room.exercises[exercise] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            roster.save_room(self.state.root, room)
            return {"kept": [n for n in room.learners if n not in left_out],
                    "left_out": [over_cap_line(n, used) for n, used in left_out.items()]}

    def reset(self, learner: str, exercise: str | None = None) -> dict:
        with roster.exclusive(self.state.root, "classroom reset"):
            room = self.room
            if learner not in room.learners:
                raise ClassroomError(f"{learner!r} is not a learner of this classroom: its "
                                     f"learners are {_span(list(room.learners))}")
            label = CREATED if exercise is None else f"begin-{exercise}"
            node = home_node(self.topology)
            if exercise is not None and label not in snapshots(self.probe, node, learner):
                raise ClassroomError(
                    f"there is no snapshot of {learner}'s home at the start of {exercise!r}: "
                    f"`classroom begin {exercise}` takes one of every learner's home "
                    f"(begun so far: {', '.join(room.exercises) or 'none'})")
            if (used := home_data(self.probe, node, learner)) > archive_cap():
                raise ClassroomError(f"{over_cap_line(learner, used)}: not reset, nothing "
                                     "cancelled (make room, then reset)")
            cancelled = cancel_jobs(self.probe, self.topology, [learner])
            cancelled.append(end_processes(self.probe, self.topology, learner))
            archive = restore_home(self.probe, node, learner, label)
            return {"learner": learner, "restored": label, "archive": archive,
                    "cancelled": cancelled}

    def destroy(self) -> dict:
        with roster.exclusive(self.state.root, "classroom destroy"):
            room = self.room
            node = home_node(self.topology)
            learners = list(room.learners)
            # The offboarding playbook cancels the jobs; the homes are archived here (the
            # cluster's policy may say `keep`), beside the room's snapshots.
            offboard(self.state, learners)
            stamp = _stamp()
            probe_script = " && ".join(
                f"if [ -d /home/{u} ]; then install -d -m 0700 {ARCHIVE}/{u} && "
                f"{_capped(u, f'{ARCHIVE}/{u}/offboarded-{stamp}.tar.gz', whole=True)} && "
                f"{{ ! test -f {ARCHIVE}/{u}/offboarded-{stamp}.tar.gz || "
                f"rm -rf --one-file-system /home/{u}; }}; fi" for u in learners)
            left = over_cap(_run(self.probe, node, f"umask 077 && install -d -m 0700 {ARCHIVE} "
                                                   f"&& {probe_script}", "archiving the homes"))
            roster.save_room(self.state.root, None)
            if self.state.load().listen != LOOPBACK:
                publish(self.state, LOOPBACK)
            return {"learners": learners,
                    "archives": f"{ARCHIVE}/<learner>/offboarded-{stamp}.tar.gz on the shared "
                                "/home",
                    "left_in_place": [f"{over_cap_line(n, used)}: not archived, left in "
                                      f"/home/{n}" for n, used in left.items()]}


def _span(names: list[str]) -> str:
    return f"{names[0]}..{names[-1]}" if len(names) > 2 else ", ".join(names)


LOOPBACK = "127.0.0.1"


def check_listen(address: str, topology: Topology) -> str:
    """The address, checked: this machine has it, and every login node asks for a
    passcode (a login node open to a room must not let a stolen key alone in)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        raise ClassroomError(f"--listen {address!r} is not an IP address: give one of this "
                             "machine's addresses (`ip -brief address` lists them)") from None
    family = socket.AF_INET6 if parsed.version == 6 else socket.AF_INET
    with socket.socket(family) as sock:
        try:
            sock.bind((str(parsed), 0))
        except OSError:
            raise ClassroomError(f"--listen {address}: this machine has no such address "
                                 "(`ip -brief address` lists its addresses)") from None
    open_ = sorted(n.name for n in topology.nodes if n.node_class == "login" and not n.ssh_mfa)
    if open_:
        raise ClassroomError(f"--listen is refused: {', '.join(open_)} log(s) in without a "
                             "one-time passcode (sshd_mfa is off in the inventory); a login "
                             "node reachable from other machines must ask for one")
    return str(parsed)


def publish(state: ClusterState, address: str) -> list[str]:
    """Publish the login nodes' ssh ports on `address` (host/lifecycle.publish) and write
    the cluster's ssh config for it; the login nodes made again (none on Docker)."""
    from aitestbed.host import lifecycle, sshconfig  # noqa: PLC0415 - Docker only here

    if state.load().listen == address:
        return []
    nodes = lifecycle.publish(state.name, address)
    cluster = Cluster.open(state.name)
    sshconfig.write(cluster.state, cluster.record, cluster.topology)
    return nodes
