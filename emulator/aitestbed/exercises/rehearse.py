"""`make rehearse`: a scripted new user through onboarding and every exercise, end to end.

Brings up its own mini cluster rh-<hex> (or uses --cluster), onboards a new user with
playbooks/onboard-user.yml, then as that user, over ssh from this machine with
the cluster's ssh config (the passcode typed by the user's askpass program),
does each exercise's steps from the guide and runs its check. Prints a report
staff can read and destroys the cluster (REHEARSE_KEEP=1 or --keep keeps it).

    python -m aitestbed.exercises.rehearse [--cluster NAME] [--user NAME] [--keep]
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click
import yaml

from aitestbed.cerebras import guide as cs_guide
from aitestbed.exercises import checks
from aitestbed.exercises.session import Result, Session
from aitestbed.graphcore import guide as gc_guide
from aitestbed.host import driver
from aitestbed.host.driver import Driver, wait_for
from aitestbed.host.errors import AitestbedError, run_click
from aitestbed.host.state import ClusterState
from aitestbed.node import guide
from aitestbed.sambanova import guide as sn_guide

FIRST_UID = 20001
STEP_TIMEOUT = 900.0
POLL = 1.0
# The rehearsal checks that each step works, not how far a model learns: its trainings
# are brief (the checks ask that a run ended, never for an accuracy). The guide's:
# mnist_poptorch.py, 10 epochs of batches of 8 (about 70 s an epoch here); lenet.py run,
# an epoch of 60,000 steps (about 110 s). The rehearsal takes about 3 minutes, not 7.
BRIEF_MNIST = "--epochs 1 --batch-size 64"
BRIEF_LENET = "--max-steps 2000"


class StepError(Exception):
    """A scripted step failed: its command's exit code and the end of its output."""


def _tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# the scripted learner -------------------------------------------------------------------
@dataclass
class Learner:
    """A user at this machine's terminal (aitestbed.host.driver): ssh, scp, and hops from
    a login node; a failed step raises StepError."""

    session: Session
    user: str
    logged_in: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    driver: Driver = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.driver = Driver(self.session.state.name, self.user)

    def log_in(self, host: str) -> None:
        """Type the passcode once per login node; later ssh and scp share the connection."""
        with self._lock:
            if host in self.logged_in:
                return
            result = self.driver.log_in(host)
            if result.returncode:
                raise StepError(f"ssh {self.user}@{host} with the passcode: "
                                f"{_tail(result.stderr)}")
            self.logged_in.add(host)

    def ssh(self, host: str, command: str, timeout: float = STEP_TIMEOUT) -> str:
        """Run command on a login node; its output, or StepError when it fails."""
        self.log_in(host)
        try:
            result = self.driver.ssh(host, command, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise StepError(f"`{_short(command)}` on {host} took over {timeout:.0f} s") from None
        out = result.stdout + result.stderr
        if result.returncode:
            raise StepError(f"`{_short(command)}` on {host} exited {result.returncode}:\n"
                            f"{_tail(out)}")
        return out

    def hop(self, login: str, node: str, script: str, timeout: float = STEP_TIMEOUT) -> str:
        """Run script in a login shell on node, reached from login as the guide does."""
        upload, run = driver.hop_commands(node, script)
        self.ssh(login, upload)
        return self.ssh(login, run, timeout)

    def scp(self, source: Path, host: str) -> None:
        self.log_in(host)
        result = self.driver.scp(source, host, timeout=120)
        if result.returncode:
            raise StepError(f"scp to {host} exited {result.returncode}: "
                            f"{_tail(result.stderr)}")

    def control(self, host: str, action: str, *options: str, check: bool = False) -> None:
        """Ask the shared connection to host to `action` (forward, cancel) with options."""
        self.log_in(host)
        self.driver.control(host, action, *options, check=check)

    def close(self) -> None:
        """End the shared connections the rehearsal opened here."""
        for host in self.logged_in:
            self.driver.log_out(host)


def _short(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else command
    return first if len(first) <= 100 else first[:97] + "..."


# each exercise's steps, as the guide gives them -------------------------------------------
def first_login(learner: Learner, v: dict[str, str]) -> None:
    out = learner.ssh(v["login"], "hostname; id; ls /software")
    if v["login"] not in out:
        raise StepError(f"logged in, but hostname says {out.split()[:1]}")


def cerebras_setup(learner: Learner, v: dict[str, str]) -> None:
    learner.ssh(v["cer_login"], guide.script("set -e", cs_guide.CS_SETUP))


def cerebras_fc_mnist(learner: Learner, v: dict[str, str]) -> None:
    learner.ssh(v["cer_login"], guide.script(
        "set -e", cs_guide.CS_ENTER, cs_guide.CS_SET_DATA_DIR, cs_guide.CS_FRESH_MODEL_DIR,
        f"{cs_guide.CS_SMOKETEST}; test ${{PIPESTATUS[0]}} -eq 0", "csctl get jobs"))


def cerebras_cancel(learner: Learner, v: dict[str, str]) -> None:
    login = v["cer_login"]
    # A quarter of the real system's pace: long enough to catch the job running.
    learner.ssh(login, guide.one_line(
        cs_guide.CS_ENTER, "export MODEL_DIR=model_cancel", "rm -rf $MODEL_DIR",
        f"(AITESTBED_TIME_SCALE=0.25 nohup {cs_guide.cs_run('cancel_me')} > cancel_me.log 2>&1 "
        "< /dev/null &)"))

    def running() -> str | None:
        rows = [line.split() for line in learner.ssh(login, "csctl get jobs").splitlines()]
        # The LABELS column: `name=cancel_me,user=<learner>` (the appliance adds user=).
        return next((r[0] for r in rows if "RUNNING" in r
                     and any("name=cancel_me" in field.split(",") for field in r)), None)

    name = wait_for(running, 180, POLL, "the job to show RUNNING in `csctl get jobs`",
                    error=StepError)
    out = learner.ssh(login, f"csctl cancel job {name}")
    if "Job canceled successfully" not in out:
        raise StepError(f"csctl cancel job said: {out.strip()}")
    wait_for(lambda: "failed due to" in learner.ssh(login, f"cat {v['fc_mnist']}/cancel_me.log")
             or None, 60, POLL, "the run to report the cancellation", error=StepError)


def graphcore_login(learner: Learner, v: dict[str, str]) -> None:
    out = learner.hop(v["gc_login"], v["gc_node"], "popc --version")
    if "POPLAR version" not in out:
        raise StepError(f"popc --version said: {_tail(out)}")


def graphcore_setup(learner: Learner, v: dict[str, str]) -> None:
    learner.hop(v["gc_login"], v["gc_node"], guide.script("set -e", gc_guide.GC_SETUP))


def _on_node(learner: Learner, v: dict[str, str], system: str, lines: list[str],
             marker: str, missing: str) -> None:
    """The guide's lines, a `set -e` script, on the system's node (through its login
    node); StepError "<missing>: <the output's tail>" when marker is not in what it printed."""
    out = learner.hop(v[f"{system}_login"], v[f"{system}_node"],
                      guide.script("set -e", *lines))
    if marker not in out:
        raise StepError(f"{missing}: {_tail(out)}")


def graphcore_mnist(learner: Learner, v: dict[str, str]) -> None:
    _on_node(learner, v, "gc", ["mkdir -p ~/tmp", gc_guide.GC_ENV, f"cd {gc_guide.MNIST_DIR}",
                                f"{gc_guide.MNIST_SRUN} {BRIEF_MNIST}"],
             "Accuracy on test set", "no accuracy in the output")


def _submit_and_wait(submit: str) -> str:
    """The guide's sbatch line, then squeue until the job has left the queue."""
    return f"""out=$({submit}) && echo "$out"
job=${{out##* }}
while squeue -h -j $job 2>/dev/null | grep -q .; do sleep 2; done"""


def _batch_job(learner: Learner, v: dict[str, str], system: str, setup: list[str],
               submit: str, log: str, marker: str, missing: str) -> None:
    """On the system's node: the setup lines (which write the job script), the guide's
    sbatch line, a wait for the job to leave the queue, then marker in its log."""
    _on_node(learner, v, system, [*setup, _submit_and_wait(submit), f"cat {log}"], marker,
             missing)


def graphcore_sbatch(learner: Learner, v: dict[str, str]) -> None:
    _batch_job(learner, v, "gc", [gc_guide.GC_ENV, f"cd {gc_guide.MNIST_DIR}",
                                  gc_guide.mnist_job_script(BRIEF_MNIST)],
               gc_guide.MNIST_SBATCH, "mnist-poptorch-output.log", "Accuracy on test set",
               "no accuracy in the output log")


def sambanova_lenet(learner: Learner, v: dict[str, str]) -> None:
    _on_node(learner, v, "sn", [sn_guide.SN_STARTERS, guide.with_arguments(
        sn_guide.SN_LENET, sn_guide.LENET_RUN, BRIEF_LENET)],
             "Test passed", "the test step did not pass")


def sambanova_sbatch(learner: Learner, v: dict[str, str]) -> None:
    _batch_job(learner, v, "sn", [sn_guide.LENET_VENV, f"cd {sn_guide.LENET}",
                                  sn_guide.lenet_job_script(BRIEF_LENET)],
               sn_guide.LENET_SBATCH, "pef/lenet/output.log", "Test Accuracy",
               "no accuracy in pef/lenet/output.log")


def data_transfer(learner: Learner, v: dict[str, str]) -> None:
    learner.scp(Path(v["payload"]), v["login"])
    learner.ssh(v["login"], f"cat {v['payload_name']}")


def port_forwarding(learner: Learner, v: dict[str, str]) -> None:
    login, node = v["sn_login"], v["sn_node"]
    local, server = guide.LOCAL_PORT, guide.SERVER_PORT
    learner.hop(login, node, f"cd ~ && (nohup {guide.SERVER} > /dev/null 2>&1 < /dev/null &)")
    hop = f"ssh -N -f -L localhost:{local}:localhost:{server} {node}"
    learner.ssh(login, hop)
    forward = f"localhost:{local}:localhost:{local}"
    # The login's shared connection carries the forward (as `ssh -N -f -L` would).
    learner.control(login, "forward", "-L", forward, check=True)
    wait_for(lambda: checks.http_get(f"http://127.0.0.1:{local}/"), 30, POLL,
             f"http://127.0.0.1:{local} to answer", error=StepError)


def stop_port_forwarding(learner: Learner, v: dict[str, str]) -> None:
    """The rehearsal's own clean-up: the tunnel, the hop's ssh and the server."""
    login, node = v["sn_login"], v["sn_node"]
    forward = f"localhost:{guide.LOCAL_PORT}:localhost:{guide.LOCAL_PORT}"
    learner.control(login, "cancel", "-L", forward)
    hop = f"ssh -N -f -L localhost:{guide.LOCAL_PORT}:localhost:{guide.SERVER_PORT} {node}"
    learner.ssh(login, f"kill $(pgrep -u $(id -u) -xf {shlex.quote(hop)}) 2>/dev/null; "
                       f"ssh {node} 'pkill -u $(id -u) -f \"{guide.SERVER}\"' "
                       "2>/dev/null; true")


SCRIPTS: dict[str, Callable[[Learner, dict[str, str]], None]] = {
    "first-login": first_login,
    "cerebras-setup": cerebras_setup,
    "cerebras-fc-mnist": cerebras_fc_mnist,
    "cerebras-cancel": cerebras_cancel,
    "graphcore-login": graphcore_login,
    "graphcore-setup": graphcore_setup,
    "graphcore-mnist": graphcore_mnist,
    "graphcore-sbatch": graphcore_sbatch,
    "sambanova-lenet": sambanova_lenet,
    "sambanova-sbatch": sambanova_sbatch,
    "data-transfer": data_transfer,
    "port-forwarding": port_forwarding,
}
CLEANUP = {"port-forwarding": stop_port_forwarding}


# the rehearsal ----------------------------------------------------------------------------
@dataclass
class Outcome:
    name: str
    seconds: float
    result: Result | None = None
    script_error: str = ""

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.passed


@dataclass
class Rehearsal:
    cluster: str
    user: str
    phases: list[tuple[str, float, str]] = field(default_factory=list)  # name, seconds, note
    outcomes: list[Outcome] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def phase(self, name: str, function: Callable[[], str]) -> None:
        say(f"{name} ...")
        begun, note = time.monotonic(), "FAILED"
        try:
            note = function()
        finally:
            self.phases.append((name, time.monotonic() - begun, note))

    def report(self) -> str:
        total = time.monotonic() - self.started
        lines = [f"aitestbed rehearsal: cluster {self.cluster}, new user {self.user}", ""]
        width = max((len(name) for name, _, _ in self.phases), default=0)
        lines += [f"  {name:<{width}} {seconds:7.1f} s  {note}".rstrip()
                  for name, seconds, note in self.phases]
        lines += ["", f"  {'EXERCISE':<20} {'RESULT':<6} {'TIME':>9}", ""]
        for o in self.outcomes:
            lines.append(f"  {o.name:<20} {'PASS' if o.passed else 'FAIL':<6} "
                         f"{o.seconds:7.1f} s")
            if o.script_error:
                lines += [f"      step failed: {line}" for line in o.script_error.splitlines()]
            for c in (o.result.criteria if o.result else []):
                if not c.done:
                    lines += [f"      todo: {c.text}", f"      next: {c.hint}"]
        passed = sum(o.passed for o in self.outcomes)
        lines += ["", f"  {passed}/{len(self.outcomes)} exercises passed; total wall time "
                      f"{minutes_and_seconds(total)} ({total:.1f} s)"]
        return "\n".join(lines)


def minutes_and_seconds(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def say(text: str) -> None:
    click.echo(f"rehearse: {text}", err=True)


def aitestbed(cluster: str, *args: str, log: Path) -> None:
    with log.open("a") as out:
        out.write(f"\n$ aitestbed --name {cluster} {' '.join(args)}\n")
        out.flush()
        result = driver.aitestbed(cluster, *args, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
    if result.returncode:
        raise AitestbedError(f"`aitestbed --name {cluster} {' '.join(args)}` failed "
                             f"(exit {result.returncode}); see {log}")


def free_uid(accounts: dict) -> int:
    """The first uid from FIRST_UID that no user, group or project has (uid = its group's
    gid), so the rehearsal can onboard on a cluster that has users already."""
    taken = {entry[key] for kind in ("users", "groups", "projects")
             for entry in accounts.get(kind, []) for key in ("uid", "gid") if key in entry}
    return next(uid for uid in range(FIRST_UID, 60000) if uid not in taken)


def onboard(cluster: str, user: str, uid: int, log: Path) -> str:
    """The staff's onboarding playbook for a new user with all three systems."""
    with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="rehearse-") as people:
        yaml.safe_dump({"accounts": [{"name": user, "uid": uid,
                                      "systems": ["cerebras", "graphcore", "sambanova"]}]},
                       people)
        people.flush()
        aitestbed(cluster, "playbook", "onboard-user", "-e", f"user={user}", "-e",
                  f"@{people.name}", log=log)
    return f"playbooks/onboard-user.yml -e user={user}"


# The systems are independent: their exercises run side by side, each system's in order.
STAGES: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("first-login",),),
    (("cerebras-setup", "cerebras-fc-mnist", "cerebras-cancel"),
     ("graphcore-login", "graphcore-setup", "graphcore-mnist", "graphcore-sbatch"),
     ("sambanova-lenet", "sambanova-sbatch", "port-forwarding")),
    (("data-transfer",),),
)


def rehearse_exercises(rehearsal: Rehearsal, session: Session, only: list[str] | None) -> None:
    user, uid = session.learner(rehearsal.user)
    learner = Learner(session, user)
    chosen = {e.name: e for e in session.exercises if not only or e.name in only}
    lock = threading.Lock()  # the learner's record and the Docker client: one at a time

    def walk(chain: tuple[str, ...]) -> None:
        for name in (n for n in chain if n in chosen):
            say(f"exercise {name} ...")
            begun = time.monotonic()
            with lock:
                session.start(chosen[name], user)
                values = session.values(user)
            error, result = "", None
            try:
                SCRIPTS[name](learner, values)
            except (StepError, subprocess.SubprocessError, OSError) as err:
                error = str(err)
            with lock:
                try:
                    result = session.check(chosen[name], user, uid)
                except AitestbedError as err:
                    error += f"\ncheck: {err}"
                rehearsal.outcomes.append(Outcome(name, time.monotonic() - begun, result,
                                                  error.strip()))
            if name in CLEANUP:
                try:
                    CLEANUP[name](learner, values)
                except StepError as err:
                    say(f"clean-up after {name}: {err}")

    try:
        for stage in STAGES:
            threads = [threading.Thread(target=walk, args=(chain,)) for chain in stage]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        learner.close()
    order = list(SCRIPTS)
    rehearsal.outcomes.sort(key=lambda o: order.index(o.name))


@click.command()
@click.option("--cluster", envvar="REHEARSE_CLUSTER", default=None,
              help="Rehearse on this running cluster (kept) instead of a new one.")
@click.option("--user", envvar="REHEARSE_USER", default="newhire", show_default=True,
              help="The new user to onboard.")
@click.option("--keep", envvar="REHEARSE_KEEP", is_flag=True,
              help="Keep the new cluster afterwards (REHEARSE_KEEP=1).")
@click.option("--only", default=None, help="Comma-separated exercises (default: all).")
def main(cluster: str | None, user: str, keep: bool, only: str | None) -> None:
    """Onboard a new user and walk them through every exercise; print the report."""
    # Short: ssh's shared-connection sockets live under the cluster's state directory,
    # and a Unix socket's path may not exceed 107 bytes.
    name = cluster or f"rh-{uuid.uuid4().hex[:6]}"
    if only:
        unknown = [n for n in only.split(",") if n not in SCRIPTS]
        if unknown:
            raise AitestbedError(f"no exercise {unknown[0]!r}: choose from {', '.join(SCRIPTS)}")
    log = Path(tempfile.gettempdir()) / f"aitestbed-{name}.log"
    rehearsal = Rehearsal(name, user)
    say(f"cluster {name}, user {user}; commands' output in {log}")
    try:
        if cluster is None:
            rehearsal.phase("bring-up (aitestbed up --profile mini)",
                            lambda: aitestbed(name, "up", "--profile", "mini", log=log) or "")
        session = Session(name)
        if cluster is None or user not in {u["name"] for u in session.users()}:
            rehearsal.phase("onboarding (playbook onboard-user)",
                            lambda: onboard(name, user, free_uid(session.accounts()), log))
        else:
            say(f"{user} is already a user of {name}: not onboarded again")
        rehearsal.phase("exercises", lambda: rehearse_exercises(
            rehearsal, session, only.split(",") if only else None) or "")
    finally:
        if cluster is None and not keep and ClusterState(name).exists():
            rehearsal.phase("destroy", lambda: aitestbed(name, "destroy", log=log) or "")
        elif cluster is None:
            say(f"kept cluster {name}: aitestbed --name {name} destroy")
        click.echo(rehearsal.report())
    if not rehearsal.outcomes or not all(o.passed for o in rehearsal.outcomes):
        sys.exit(1)


def run() -> None:
    run_click(main, "rehearse")


if __name__ == "__main__":
    run()
