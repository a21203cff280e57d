"""The `aitestbed` command: bring an emulated ALCF AI Testbed up and use it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click
from docker.errors import DockerException

from aitestbed.classroom.cli import classroom, load
from aitestbed.exercises.cli import exercise
from aitestbed.host import images, jobrun, lifecycle, passcode, sshconfig
from aitestbed.host import systems as system_registry
from aitestbed.host.cluster import Cluster
from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError, run_click
from aitestbed.host.health import cluster_status, wait_ready
from aitestbed.host.inventory import ansible_source, parse_systems
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.jobrun import report as jobrun_report
from aitestbed.host.naming import check_cluster_name
from aitestbed.host.paths import project_root
from aitestbed.host.playbook import copies_host_artifacts, playbook_path, run_playbook
from aitestbed.host.provider import PROVIDERS
from aitestbed.host.state import ClusterState, practice_user_name
from aitestbed.node.login import as_login

DEFAULT_CLUSTER = "aitestbed"


def _state(ctx: click.Context) -> ClusterState:
    return ClusterState(ctx.obj["name"])


def _provider_of(name: str) -> str | None:
    state = ClusterState(name)
    return state.load().provider if state.exists() else None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--name", "-n", envvar="AITESTBED_CLUSTER", default=DEFAULT_CLUSTER,
              show_default=True, show_envvar=True,
              help="Cluster name; prefixes every container, network and volume.")
@click.pass_context
def cli(ctx: click.Context, name: str) -> None:
    """Emulated ALCF AI Testbed: its systems' login, compute and scheduler nodes in containers.

    \b
    aitestbed up                  # the full testbed as the 2023 guide shows it (profile alcf)
    aitestbed up --profile mini   # one login and one or two compute nodes per system
    aitestbed up --profile alcf-2026 --systems groq   # today's GroqRack under OpenPBS
    aitestbed ssh-config > ~/.ssh/aitestbed.conf && ssh -F ~/.ssh/aitestbed.conf gc-login-01
    """
    # state and provider_of: what a system's own commands (the registry's) are given
    ctx.obj = {"name": check_cluster_name(name), "state": ClusterState(name),
               "provider_of": lifecycle.provider_of}
    if not (project_root() / "inventory").is_dir():
        raise AitestbedError(
            f"no project tree at {project_root()} (its inventory/, roles/ and playbooks/): "
            "run aitestbed from its checkout, or install it from there with `pipx install .` "
            "(docs/install.md), or set AITESTBED_HOME to a checkout")


@cli.command()
@click.option("--profile", "-p", envvar="AITESTBED_PROFILE", default=None,
              help="Inventory profile: alcf (the 2023 guide, default), mini, alcf-2026 (today's "
                   "docs), alcf-2026-mini, or an inventory file.")
@click.option("--systems", "-s", envvar="AITESTBED_SYSTEMS", default=None,
              help="Comma-separated subset of the profile's systems "
                   f"({system_registry.describe()}); only their images are built.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Block until every service is ready.")
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to wait for readiness.")
@click.option("--recreate", is_flag=True,
              help="Replace the containers of nodes running an image older than this "
                   "checkout's. Keeps /home, /projects, /software, queued jobs and WSJobs; "
                   "what ran and the nodes' own logs start over.")
@click.option("--provider", type=click.Choice(PROVIDERS), default=None,
              envvar="AITESTBED_PROVIDER",
              help="Where the nodes run: docker (containers on this host, the default) or "
                   "kubernetes (pods on a cluster; docs/kubernetes.md). Kept for the "
                   "cluster's life.")
@click.option("--kubeconfig", default=None, metavar="PATH",
              type=click.Path(dir_okay=False, resolve_path=True),
              help="kubernetes: the kubeconfig (default $KUBECONFIG, else ~/.kube/config); "
                   "the cluster keeps it.")
@click.option("--context", "kube_context", default=None, metavar="CONTEXT",
              help="kubernetes: the kubeconfig context (default: the current one).")
@click.option("--namespace", default=None, metavar="NAMESPACE",
              help="kubernetes: the namespace (default aitestbed; one testbed each).")
@click.option("--registry", default=None, metavar="HOST:PORT/PREFIX",
              help="kubernetes: the registry the node images are pushed to and pulled from.")
@click.option("--storage-class", default=None, metavar="CLASS",
              help="kubernetes: a ReadWriteMany storage class (default: the cluster's).")
@click.option("--ssh-address", default=None, metavar="ADDRESS",
              help="kubernetes: where the login nodes' NodePorts are reached (default: the "
                   "address of the machine the first login node runs on).")
@click.pass_context
def up(ctx: click.Context, profile: str | None, systems: str | None, wait: bool,
       timeout: float, recreate: bool, provider: str | None, kube_context: str | None,
       namespace: str | None, registry: str | None, storage_class: str | None,
       ssh_address: str | None, kubeconfig: str | None) -> None:
    """Create or start the cluster (idempotent; keeps /home and /projects)."""
    started = time.monotonic()
    name = ctx.obj["name"]
    kube = {"context": kube_context, "namespace": namespace, "registry": registry,
            "storage_class": storage_class, "ssh_address": ssh_address,
            "kubeconfig": kubeconfig}
    if any(kube.values()) and (provider or _provider_of(name)) != "kubernetes":
        given = [f"--{k.replace('_', '-')}" for k, v in kube.items() if v]
        raise click.UsageError(f"{', '.join(given)}: only with --provider kubernetes")
    if provider == "kubernetes" and not kubeconfig and os.environ.get("KUBECONFIG") \
            and os.pathsep not in os.environ["KUBECONFIG"]:
        kube["kubeconfig"] = os.path.abspath(os.environ["KUBECONFIG"])
    result = lifecycle.up(name, profile, parse_systems(systems), practice_user_name(),
                          wait=wait, timeout=timeout, recreate=recreate, provider=provider,
                          provider_options=kube if any(kube.values()) else None)
    topology = result.topology
    for note in result.notes:
        click.echo(f"aitestbed: {note}", err=True)
    for warning in result.warnings:
        click.echo(f"aitestbed: warning: {warning}", err=True)
    if result.replaced:
        click.echo(f"aitestbed: replaced {len(result.replaced)} containers with this checkout's "
                   f"images: {', '.join(result.replaced)}", err=True)
    if result.outdated:
        click.echo(f"aitestbed: warning: {len(result.outdated)} nodes run images older than "
                   f"this checkout's ({', '.join(result.outdated)}); `aitestbed --name {name} "
                   "up --recreate` replaces them, keeping /home, /projects, /software, queued "
                   "jobs and WSJobs", err=True)
    path = sshconfig.write(result.cluster.state, result.cluster.record, topology)
    verb = "ready" if wait else "started"
    click.echo(f"cluster {name!r} {verb}: {len(topology.nodes)} nodes in "
               f"{time.monotonic() - started:.1f} s; ssh -F {path} <login node>", err=True)


@cli.command()
@click.pass_context
def down(ctx: click.Context) -> None:
    """Stop the cluster's nodes; keep them, their volumes and the state."""
    stopped = lifecycle.down(ctx.obj["name"])
    click.echo(f"cluster {ctx.obj['name']!r} stopped ({stopped} nodes)", err=True)


@cli.command()
@click.pass_context
def destroy(ctx: click.Context) -> None:
    """Remove everything of this cluster: containers, network, volumes, state."""
    removed = lifecycle.destroy(ctx.obj["name"])
    click.echo(f"cluster {ctx.obj['name']!r} destroyed: {', '.join(removed)}", err=True)


@cli.command()
@click.pass_context
def status(ctx: click.Context) -> None:
    """Nodes and services with their health."""

    cluster = Cluster.open(ctx.obj["name"])
    nodes = cluster_status(cluster)
    listen = cluster.record.listen
    rows = [("NODE", "SYSTEM", "CLASS", "STATE", "SSH", "SERVICES")]
    rows += [(n.name, n.system, n.node_class, n.state,
              f"{listen}:{n.ssh_port}" if n.ssh_port else "-", n.health.summary) for n in nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]))
    ready = sum(n.health.ready for n in nodes)
    click.echo(f"\n{ready}/{len(nodes)} nodes ready", err=True)


@cli.command()
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(min=0),
              help="Give up after this many seconds.")
@click.pass_context
def wait(ctx: click.Context, timeout: float) -> None:
    """Block until every node and service of the cluster is ready."""

    cluster = Cluster.open(ctx.obj["name"])
    topology = cluster.topology
    waited = wait_ready(cluster.provider, cluster.name, [n.name for n in topology.nodes],
                        timeout=timeout)
    click.echo(f"cluster {cluster.name!r} ready ({len(topology.nodes)} nodes) after "
               f"{waited:.1f} s", err=True)


@cli.command("ssh-config")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of standard output.")
@click.pass_context
def ssh_config(ctx: click.Context, output: str | None) -> None:
    """An ssh_config with a Host entry per login node (ssh -F FILE cer-login-01)."""

    state = _state(ctx)
    record = state.load()
    text = sshconfig.render(state, record, load_inventory(record.profile, record.systems))
    if output:
        try:
            with open(output, "w") as out:
                out.write(text)
        except OSError as err:
            raise AitestbedError(f"cannot write {output}: {err.strerror}") from None
    else:
        click.echo(text, nl=False)


@cli.command()
@click.argument("node")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--user", "-u", default=None, help="Run as this user (default root).")
@click.pass_context
def shell(ctx: click.Context, node: str, command: tuple[str, ...], user: str | None) -> None:
    """Open a login shell on NODE, or run COMMAND there (aitestbed shell NODE -- CMD ...)."""
    state = _state(ctx)
    record = state.load()
    name = load_inventory(record.profile, record.systems).node(node).name
    argv = lifecycle.provider_of(state).terminal_argv(
        state.name, name, login_command(command, user), tty=sys.stdin.isatty())
    os.execv(argv[0], argv)


class _RunCommand(click.Command):
    """`run`'s own usage errors exit with TOOL_ERROR too, as its other errors do."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            err.exit_code = jobrun.TOOL_ERROR
            raise


@cli.command("run", cls=_RunCommand)
@click.argument("scripts", nargs=-1, required=True)
@click.option("--system", "-s", required=True,
              type=click.Choice(list(system_registry.run_targets())),
              help="Where the scripts run: " + "; ".join(
                  f"{t.name}: {t.help}" for t in system_registry.run_targets().values()) + ".")
@click.option("--user", "-u", default=None, help="Run as this user (default: the practice "
              "user).")
@click.option("--dir", "-C", "directory", default=".", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="The directory copied to the user's home on the login node (.git and what "
                   ".gitignore names left out); scripts are named relative to it.")
@click.option("--output-dir", "-o", default="aitestbed-output", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where each script's output and the files its job created go "
                   "(OUTPUT-DIR/SCRIPT/).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds; cancel what has not finished then (state TIMEOUT, exit 124).")
@click.option("--sbatch", "sbatch", multiple=True, metavar='"OPTIONS"',
              help='sbatch options for every script, e.g. --sbatch "--ipus=1 --time=10" '
                   "(repeatable; the scripts' #SBATCH lines apply too).")
@click.option("--qsub", "qsub", multiple=True, metavar='"OPTIONS"',
              help='qsub options for every script of a PBS target, e.g. --qsub '
                   '"-l select=1,place=excl" (repeatable; the scripts\' #PBS lines apply too; '
                   "-I and -W block=true are refused).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a JUnit XML report here (one testcase per script).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as JSON on stdout (the jobs' output goes to stderr).")
@click.option("--quiet", "-q", is_flag=True, help="Do not stream the jobs' output.")
@click.option("--keep", is_flag=True,
              help="Keep the run's copy on the cluster (~/aitestbed-runs/RUN).")
@click.option("--max-output", default="256M", show_default=True, metavar="SIZE",
              callback=lambda ctx, param, value: _size(value),
              help="Bring back at most SIZE (K, M, G) of each script's files (the output "
                   "file first, then the smallest); what is left is named, and stays on "
                   "the cluster with --keep. A sparse file counts at its full size.")
@click.pass_context
def run_cmd(ctx: click.Context, scripts: tuple[str, ...], system: str, user: str | None,
            directory: Path, output_dir: Path, timeout: float | None,
            sbatch: tuple[str, ...], qsub: tuple[str, ...], junit: Path | None,
            as_json: bool, quiet: bool, keep: bool, max_output: int) -> None:
    """Run job SCRIPTS on a system of the cluster as a user, and exit with their result.

    \b
    aitestbed run --system graphcore --sbatch "--ipus=1" train.sbatch
    aitestbed run -s sambanova --junit report.xml compile.sh run.sh   # side by side
    aitestbed run -s cerebras --timeout 900 fc_mnist.sh               # `python run.py CSX`
    aitestbed run -s groq --qsub "-l select=1,place=excl" run.sh      # output at its end

    Copies the directory (--dir) to ~/aitestbed-runs/ on the system's login node,
    submits each script with sbatch (Graphcore, SambaNova) or qsub (GroqRack, from a
    GroqNode) or runs it with bash on the Cerebras login node, streams its output (a PBS
    job's when it ends), brings back its output and the files it created
    (OUTPUT-DIR/SCRIPT/), and prints each script's final state.

    \b
    Exit status:
      0    every script COMPLETED (a Cerebras script: exit 0)
      N    the first failed script's own exit code (a job's own 125 is reported as 1)
      124  a job ran past --timeout or its time limit (TIMEOUT)
      1    a job ended without an exit code of its own (CANCELLED, NODE_FAIL, ...)
      125  aitestbed run itself failed: no such cluster, cluster not ready, unknown
           system or user, no access, missing script or directory, bad option (one
           sbatch or qsub refuses too)
    """
    several = len(scripts) > 1
    stream = sys.stderr if as_json else sys.stdout

    def on_output(script: str, text: str) -> None:
        if quiet:
            return
        if several:
            text = "".join(f"[{script}] {line}\n" for line in text.splitlines())
        stream.write(text)
        stream.flush()

    def on_progress(message: str) -> None:
        click.echo(f"aitestbed run: {message}", err=True)

    options = jobrun.Options(system, list(scripts), user, directory, output_dir, timeout,
                             list(sbatch), keep, on_output, on_progress, qsub=list(qsub),
                             max_output=max_output)
    try:
        report = jobrun.run(ctx.obj["name"], options)
        if junit:
            try:
                junit.write_text(jobrun_report.junit(report))
            except OSError as err:
                raise AitestbedError(f"cannot write {junit}: {err.strerror}") from None
    except AitestbedError as err:
        click.echo(f"aitestbed run: error: {err}", err=True)
        sys.exit(jobrun.TOOL_ERROR)
    except DockerException as err:
        click.echo(f"aitestbed run: error: Docker engine: {err}", err=True)
        sys.exit(jobrun.TOOL_ERROR)
    for result in report.results:
        click.echo(f"aitestbed run: {result.summary()}", err=True)
    if as_json:
        click.echo(jobrun_report.as_json(report), nl=False)
    sys.exit(report.exit_code)


def _size(text: str) -> int:
    try:
        return jobrun.parse_size(text)
    except jobrun.PlanError as err:
        raise click.BadParameter(str(err)) from None


def login_command(command: tuple[str, ...], user: str | None) -> list[str]:
    """A login shell on a node (run there by its provider); as USER, a login as a login
    makes it (runuser -l: HOME, USER, LOGNAME and SHELL from the user's passwd entry, in
    the home, a login shell; an unknown user is runuser's own error)."""
    joined = " ".join(command)  # as ssh joins its arguments
    if user:
        return as_login(user, joined if command else None)
    return ["bash", "-l", *(["-c", joined] if command else [])]


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("playbook")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def playbook(ctx: click.Context, playbook: str, args: tuple[str, ...]) -> None:
    """Run playbooks/PLAYBOOK.yml against this cluster: aitestbed playbook site."""

    path = playbook_path(playbook)  # an unknown name before anything is built (C19)
    state = _state(ctx)
    record = state.load()
    topology = load_inventory(record.profile, record.systems)
    if copies_host_artifacts(playbook):
        images.build_host_artifacts(topology.systems)  # the roles copy them
    # localhost: the account playbooks record requests in the state directory first.
    # An inventory file kept outside the project reads the project's group_vars.
    profile = ansible_source(topology.inventory_path, state.root / "profile-inventory")
    result = run_playbook(str(path), [profile, state.inventory_path],
                          limit=",".join([*(n.name for n in topology.nodes), "localhost"]),
                          args=list(args))
    # What the playbook wrote in the state directory reaches nodes the provider does not
    # bind it into (their copy is what a node restarted elsewhere starts from).
    Cluster.open(state.name).sync_files()
    sys.exit(result.returncode)


@cli.command()
@click.argument("hosts", nargs=-1)
@click.option("--user", "-u", default=None, help="Log in as this user (default: the practice "
              "user).")
@click.pass_context
def login(ctx: click.Context, hosts: tuple[str, ...], user: str | None) -> None:
    """Log in to login nodes once, typing the current passcode, for scripts and CI.

    The connections stay open (ControlMaster), so later `ssh -F <config> HOST`,
    scp and rsync there ask nothing. Default: every login node.
    """
    state = _state(ctx)
    record = state.load()
    user = user or record.user
    if user not in state.registry().users:
        raise AitestbedError(f"unknown user {user!r} in cluster {state.name!r}")
    for host in hosts or sorted(record.ports):
        def waiting(seconds: float, host: str = host) -> None:
            click.echo(f"{user}@{host}: this step's passcodes were used; "
                       f"waiting {seconds:.0f} s for a new one", err=True)

        result = sshconfig.log_in(state, host, user, on_wait=waiting)
        if result.returncode:
            raise AitestbedError(f"{user}@{host}: {result.stderr.strip() or 'login failed'}")
        click.echo(f"{user}@{host}: logged in", err=True)


@cli.command("passcode")
@click.argument("user", required=False)
@click.option("--watch", "-w", is_flag=True,
              help="Keep showing the code and the seconds it has left (Ctrl-C ends).")
@click.option("--typed", is_flag=True,
              help="Print what to type at `Password:`: for CRYPTOCard users the PIN, then "
                   "the code (for SSH_ASKPASS).")
@click.option("--ahead", type=click.IntRange(0, 1), default=0, envvar="AITESTBED_PASSCODE_AHEAD",
              hidden=True)  # the next step's code, which pam_oath's window takes (log_in)
@click.pass_context
def passcode_cmd(ctx: click.Context, user: str | None, watch: bool, typed: bool,
                 ahead: int) -> None:
    """The current one-time passcode of USER (default: the practice user), as MobilePASS+ shows it.

    \b
    ssh -F ~/.ssh/aitestbed.conf cer-login-01
    Password: <type the code>
    """
    state = _state(ctx)
    token = passcode.token_of(state, user or state.load().user)
    show = passcode.typed if typed else passcode.code
    if not watch:
        click.echo(show(token, time.time() + ahead * passcode.STEP))
        if token.get("pin") and not typed and sys.stderr.isatty():
            click.echo("(CRYPTOCard: type your 4-digit PIN, then this code)", err=True)
        return
    width = passcode.STEP
    while True:
        left = passcode.seconds_left()
        bar = "#" * left + "-" * (width - left)
        click.echo(f"\r{show(token)}  [{bar}] {left:2d} s ", nl=False)
        time.sleep(1 - time.time() % 1)


@cli.command()
@click.option("--profile", "-p", envvar="AITESTBED_PROFILE", default="alcf", show_default=True)
@click.option("--systems", "-s", envvar="AITESTBED_SYSTEMS", default=None,
              help="Only these systems' images (comma-separated).")
@click.option("--no-cache", is_flag=True, help="Rebuild the OS layer from scratch.")
def build(profile: str, systems: str | None, no_cache: bool) -> None:
    """Build the node images of a profile, or of some of its systems (done by `up` when
    they are missing); nothing of a system the profile or subset does not contain."""

    client = connect()
    if no_cache:
        images.ensure_node_os(client, nocache=True)
    tags = images.ensure_class_images(client, _classes(profile, systems))
    for node_class, tag in tags.items():
        click.echo(f"{node_class}\t{tag}")


@click.group("images")
def images_cmd() -> None:
    """The node images in one file or a registry: a fresh machine (a CI runner) loads or
    pulls them and `up` builds nothing."""


_profile_option = click.option("--profile", "-p", envvar="AITESTBED_PROFILE", default="alcf",
                               show_default=True, help="Inventory profile: its node classes.")
_systems_option = click.option("--systems", "-s", envvar="AITESTBED_SYSTEMS", default=None,
                               help="Only these systems' node classes (comma-separated).")
_registry_option = click.option("--registry", "-r", envvar="AITESTBED_REGISTRY", required=True,
                                help="HOST:PORT/PREFIX, e.g. 127.0.0.1:5000/aitestbed.")


def _classes(profile: str, systems: str | None) -> dict[str, tuple[str, ...]]:
    return load_inventory(profile, parse_systems(systems)).class_systems


@images_cmd.command("key")
@_profile_option
@_systems_option
def images_key(profile: str, systems: str | None) -> None:
    """Print a hash of every input of the images (no Docker needed): a CI cache key."""
    from aitestbed.host import imagecache

    click.echo(imagecache.cache_key(_classes(profile, systems)))


@images_cmd.command("save")
@click.argument("file", type=click.Path(dir_okay=False))
@_profile_option
@_systems_option
def images_save(file: str, profile: str, systems: str | None) -> None:
    """Save base, OS layer and class images to FILE (zstd); builds what is missing first."""
    from pathlib import Path

    from aitestbed.host import imagecache

    classes = _classes(profile, systems)
    result = imagecache.save(connect(), Path(file), classes, imagecache.cache_key(classes),
                             profile)
    click.echo(f"{result.path}\t{result.size / 1e6:.0f} MB ({result.uncompressed / 1e6:.0f} MB "
               f"of images) in {result.seconds:.0f} s")
    for tag in result.tags:
        click.echo(tag)


@images_cmd.command("load")
@click.argument("file", type=click.Path(dir_okay=False))
def images_load(file: str) -> None:
    """Verify FILE (made by `images save`), then load its images with their tags."""
    from pathlib import Path

    from aitestbed.host import imagecache

    path = Path(file)
    manifest = imagecache.read_manifest(path)
    try:
        key = imagecache.cache_key(manifest.get("classes", []))
    except (AitestbedError, OSError):
        key = None
    result = imagecache.load(connect(), path, key)
    for note in result.notes:
        click.echo(f"aitestbed: note: {note}", err=True)
    click.echo(f"{result.path}\tloaded in {result.seconds:.0f} s "
               f"(verified in {result.verify_seconds:.0f} s)")
    for tag in result.tags:
        click.echo(tag)


@images_cmd.command("push")
@_registry_option
@_profile_option
@_systems_option
def images_push(registry: str, profile: str, systems: str | None) -> None:
    """Push base, OS layer and class images to REGISTRY; builds what is missing first."""
    from aitestbed.host import imagecache

    for name in imagecache.push(connect(), registry, _classes(profile, systems)):
        click.echo(name)


@images_cmd.command("pull")
@_registry_option
@_profile_option
@_systems_option
def images_pull(registry: str, profile: str, systems: str | None) -> None:
    """Pull the images this checkout needs from REGISTRY and tag them with the local names."""
    from aitestbed.host import imagecache

    for tag in imagecache.pull(connect(), registry, _classes(profile, systems)):
        click.echo(tag)


cli.add_command(images_cmd)
for _command in system_registry.commands():  # a system's own (Metis: `metis`)
    cli.add_command(_command)
cli.add_command(exercise)
cli.add_command(classroom)
cli.add_command(load)


def main() -> None:
    run_click(cli, "aitestbed")


if __name__ == "__main__":
    main()
