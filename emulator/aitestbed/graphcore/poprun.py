"""`poprun`: launch a program as one or more PopDist instances on the job's V-IPU partition.

    poprun [options] program [args...]

What the real poprun does, for the parts a user sees: it finds the V-IPU
server and the partition, checks that the replicas fit, prints its topology
box, and starts `--num-instances` copies of the program with PopDist's
environment, their output tagged `[1,<instance>]<stdout>:` as mpirun's
--tag-output does. The emulation starts the instances itself as local
subprocesses (no MPI): every instance runs on this host whatever -H names;
torch.distributed across instances gets MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.

Partitions belong to Slurm here (slurm_<jobid>, made for `srun --ipus=N`), so
--update-partition, --reset-partition and --remove-partition are accepted and
leave the partition as it is; --num-ilds is at most 1 (one Bow-Pod64).
Log lines go to stderr; -v shows [I] lines and the topology, -vv [D] lines too.
The POD's V-IPU server (`vipu`, or the guide's 10.1.3.101) is shown by its documented
address, 10.1.3.101:8090, as in the guide (aitestbed.graphcore.vipu.client).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import BinaryIO

from aitestbed.graphcore.gc_info import devices_of_size, partition_devices
from aitestbed.graphcore.vipu.client import (
    DEFAULT_PORT,
    POD_SERVER,
    VipuClient,
    VipuError,
    shown_address,
)

PROG = "poprun"
BOOL_OPTIONS = ("--update-partition", "--reset-partition", "--remove-partition", "--numa-aware",
                "--print-topology", "--offline-mode")
TRUE_WORDS = ("yes", "true", "on", "1")
FALSE_WORDS = ("no", "false", "off", "0")
VALUE_OPTIONS = {"-H", "--host", "--num-replicas", "--ipus-per-replica", "--num-instances",
                 "--num-ilds", "--vipu-server-host", "--vipu-server-port",
                 "--vipu-server-timeout", "--vipu-partition", "--executable-cache-path",
                 "--mpi-global-args", "--mpi-local-args", "--only-output-from-instance"}
TERMINATE_GRACE_S = 10.0
PARTIAL_LINE_HOLD_S = 0.05


class PoprunError(Exception):
    """A problem poprun reports as a POPRUN [E] line before exiting with status 1."""


# --- command line ------------------------------------------------------------------------------

def yes_no(text: str) -> bool:
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"invalid value '{text}': expected yes or no")


def _at_least(minimum: int, rule: str):
    """An argparse type for whole numbers of `minimum` or more."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value '{text}': expected a number") \
                from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"invalid value '{text}': {rule}")
        return value
    return convert


positive = _at_least(1, "must be at least 1")
non_negative = _at_least(0, "must be 0 or more")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, usage=f"{PROG} [options] program [args...]", allow_abbrev=False,
        description="Run a program as PopDist instances on the IPUs of a V-IPU partition.",
        epilog="Yes/no options take yes, no, true, false, on, off, 1 or 0 (alone: yes).")
    add = parser.add_argument
    add("-H", "--host", metavar="HOSTS", help="comma-separated hosts the instances run on "
        "(default: this host; the emulation runs every instance on this host)")
    add("--num-replicas", type=positive, default=1, metavar="N",
        help="total number of replicas (default: 1)")
    add("--ipus-per-replica", type=positive, default=1, metavar="N",
        help="IPUs per replica (default: 1)")
    add("--num-instances", type=positive, default=1, metavar="N",
        help="number of program instances (default: 1)")
    add("--num-ilds", type=positive, default=1, metavar="N",
        help="number of IPU-Link domains (default: 1)")
    add("--vipu-server-host", metavar="HOST",
        help="V-IPU server address (default: IPUOF_VIPU_API_HOST, else vipu)")
    add("--vipu-server-port", type=positive, metavar="PORT",
        help=f"V-IPU server port (default: IPUOF_VIPU_API_PORT, else {DEFAULT_PORT})")
    add("--vipu-server-timeout", type=positive, default=120, metavar="SECONDS",
        help="V-IPU server timeout (default: 120)")
    add("--vipu-partition", metavar="NAME",
        help="V-IPU partition (default: the job's, IPUOF_VIPU_API_PARTITION_ID)")
    for name, text in (("--update-partition", "update the partition to fit (accepted; "
                        "partitions are Slurm's here)"),
                       ("--reset-partition", "reset the partition before running (accepted)"),
                       ("--remove-partition", "remove the partition afterwards (accepted; "
                        "Slurm removes it at job end)"),
                       ("--numa-aware", "bind instances to NUMA nodes (accepted)"),
                       ("--print-topology", "print the topology box"),
                       ("--offline-mode", "run without IPUs and without a V-IPU server")):
        add(name, type=yes_no, default=False, metavar="yes|no", help=text)
    add("--executable-cache-path", metavar="DIR",
        help="executable cache directory for the instances (sets POPTORCH_CACHE_DIR)")
    add("--mpi-global-args", default="", metavar="ARGS",
        help="mpirun arguments (only -x NAME[=VALUE] has an effect here)")
    add("--mpi-local-args", default="", metavar="ARGS",
        help="per-instance mpirun arguments (only -x NAME[=VALUE] has an effect here)")
    add("--only-output-from-instance", type=non_negative, metavar="N",
        help="show the output of this instance only")
    add("-v", "--verbose", action="count", default=0, help="more output: -v info, -vv debug")
    return parser


def split_command_line(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """poprun's options, and the program with its arguments (from the first non-option on).

    Yes/no options take their value as `--opt=yes`, `--opt yes` or alone (`--opt`);
    the others as `--opt=value` or `--opt value`. Anything else starting with "-" is left
    for argparse to accept or report.
    """
    options: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return options, list(argv[i + 1:])
        if not token.startswith("-") or token == "-":
            return options, list(argv[i:])
        i += 1
        if token in BOOL_OPTIONS:
            if i < len(argv) and argv[i].lower() in TRUE_WORDS + FALSE_WORDS:
                token = f"{token}={argv[i]}"
                i += 1
            else:
                token = f"{token}=yes"
        elif token in VALUE_OPTIONS and i < len(argv):
            # One token, so that a value starting with "-" (--mpi-global-args "--tag-output")
            # stays a value.
            token = f"{token}={argv[i]}" if token.startswith("--") else f"{token}{argv[i]}"
            i += 1
        options.append(token)
    return options, []


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = build_parser()
    options, command = split_command_line(argv)
    args = parser.parse_args(options)
    if not command:
        parser.error("the program to run is missing: poprun [options] program [args...]")
    return args, command


# --- topology ----------------------------------------------------------------------------------

def _center(text: str, width: int) -> str:
    pad = max(width - len(text), 0)
    return " " * (pad // 2) + text + " " * (pad - pad // 2)


def render_topology(hosts: Sequence[str], num_ilds: int, num_instances: int,
                    num_replicas: int) -> list[str]:
    """poprun's topology box: hosts, ILDs and instances each spanning their replicas."""
    rows = [("hosts", list(hosts)), ("ILDs", [str(i) for i in range(num_ilds)]),
            ("instances", [str(i) for i in range(num_instances)]),
            ("replicas", [str(r) for r in range(num_replicas)])]
    cell = len(str(num_replicas - 1)) + 2  # one replica's width

    def span(count: int, width: int) -> int:  # width of a cell spanning num_replicas/count
        return (num_replicas // count) * (width + 1) - 1

    while any(len(text) + 2 > span(len(cells), cell) for _, cells in rows for text in cells):
        cell += 1
    right = span(1, cell)
    title = "poprun topology"
    while 11 + 1 + right < len(title) + 2:
        cell += 1
        right = span(1, cell)
    inner = 11 + 1 + right
    lines = [" " + "=" * inner, "|" + _center(title, inner) + "|", "|" + "=" * inner + "|"]
    for n, (label, cells) in enumerate(rows):
        width = span(len(cells), cell)
        lines.append(f"| {label:<10}|" + "|".join(_center(c, width) for c in cells) + "|")
        if n < len(rows) - 1:
            lines.append("|" + "-" * 11 + "|" + "-" * right + "|")
    lines.append(" " + "-" * inner)
    return lines


# --- the instances' environment ----------------------------------------------------------------

def mpi_exports(*arg_strings: str) -> dict[str, str]:
    """The NAME=VALUE pairs of `-x NAME=VALUE` in mpirun arguments (`-x NAME` is inherited)."""
    exports: dict[str, str] = {}
    for text in arg_strings:
        try:
            tokens = shlex.split(text)
        except ValueError as err:
            raise PoprunError(f"Cannot parse the mpirun arguments '{text}': {err}") from None
        for i, token in enumerate(tokens[:-1]):
            if token == "-x" and "=" in tokens[i + 1]:
                name, value = tokens[i + 1].split("=", 1)
                exports[name] = value
    return exports


def instance_env(base: Mapping[str, str], index: int, num_instances: int, num_replicas: int,
                 ipus_per_replica: int, partition: str | None = None,
                 cache_path: str | None = None, master_port: int = 0,
                 extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of instance `index`: PopDist's variables and torch.distributed's."""
    local = num_replicas // num_instances
    env = dict(base)
    env.update(extra or {})
    env.update({
        "POPDIST_NUM_TOTAL_REPLICAS": str(num_replicas),
        "POPDIST_NUM_INSTANCES": str(num_instances),
        "POPDIST_INSTANCE_INDEX": str(index),
        "POPDIST_NUM_LOCAL_REPLICAS": str(local),
        "POPDIST_REPLICA_INDEX_OFFSET": str(index * local),
        "POPDIST_NUM_IPUS_PER_REPLICA": str(ipus_per_replica),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "RANK": str(index),
        "WORLD_SIZE": str(num_instances),
        "LOCAL_RANK": str(index),
        "LOCAL_WORLD_SIZE": str(num_instances),
    })
    if partition:
        env["IPUOF_VIPU_API_PARTITION_ID"] = partition
    if cache_path:
        env["POPTORCH_CACHE_DIR"] = cache_path
    # Instances write to pipes; unbuffered Python keeps their lines in step, as on a terminal.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- output ------------------------------------------------------------------------------------

class LineTagger:
    """Puts a tag at the start of every line of a byte stream fed in arbitrary pieces.

    A partial line is passed on at once (progress bars ending in \\r keep moving); its
    tag is written when its first byte is, so each line carries exactly one tag.
    """

    def __init__(self, tag: bytes):
        self.tag = tag
        self.at_line_start = True

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        parts = data.split(b"\n")
        for n, part in enumerate(parts):
            last = n == len(parts) - 1
            if last and not part:
                break
            if self.at_line_start:
                out += self.tag
            out += part
            if last:
                self.at_line_start = False
            else:
                out += b"\n"
                self.at_line_start = True
        return bytes(out)


@dataclass
class Output:
    """poprun's own stdout and stderr, shared by its log and the instances' tagged output."""

    stdout: BinaryIO
    stderr: BinaryIO
    verbosity: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, stream: BinaryIO, data: bytes) -> None:
        with self.lock:
            try:
                stream.write(data)
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # a reader that went away (poprun ... | head) must not stop the instances

    def log(self, level: str, message: str) -> None:
        if {"E": 0, "W": 0, "I": 1, "D": 2}[level] > self.verbosity:
            return
        now = datetime.now()
        stamp = f"{now:%H:%M:%S}.{now.microsecond // 1000:03d}"
        self.write(self.stderr, f"{stamp} {os.getpid()} POPRUN [{level}] {message}\n".encode())

    def block(self, lines: Sequence[str]) -> None:
        self.write(self.stderr, ("\n".join(lines) + "\n").encode())


def pump(source: BinaryIO, tagger: LineTagger, output: Output, stream: BinaryIO,
         shown: bool) -> None:
    """Copy an instance's stream to ours, tagged. Whole lines go at once; a partial line
    waits up to PARTIAL_LINE_HOLD_S for the rest (print() writes a line in pieces), then
    goes as it is, so progress bars keep moving."""
    fd = source.fileno()
    pending = b""

    def emit(data: bytes) -> None:
        if shown and data:
            output.write(stream, tagger.feed(data))

    while True:
        if pending and not select.select([fd], [], [], PARTIAL_LINE_HOLD_S)[0]:
            emit(pending)
            pending = b""
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        pending += data
        cut = pending.rfind(b"\n") + 1
        if cut:
            emit(pending[:cut])
            pending = pending[cut:]
    emit(pending)
    source.close()


# --- mpirun's messages -------------------------------------------------------------------------

RULE = "-" * 74


def not_found_message(program: str, node: str) -> list[str]:
    return [RULE,
            "mpirun was unable to find the specified executable file, and therefore",
            "did not launch the job.  This error was first reported for process",
            "rank 0; it may have occurred for other processes as well.",
            "",
            "NOTE: A common cause for this error is misspelling a mpirun command",
            "      line parameter option (remember that mpirun interprets the first",
            "      unrecognized command line token as the executable).",
            "",
            f"Node:       {node}",
            f"Executable: {program}",
            RULE]


def no_permission_message(program: str, node: str) -> list[str]:
    return [RULE,
            "mpirun was unable to launch the specified application as it lacked",
            "permissions to execute an executable:",
            "",
            f"Executable: {program}",
            f"Node: {node}",
            "",
            "while attempting to start process rank 0.",
            RULE]


def failure_message(rank: int, returncode: int, pid: int, node: str) -> list[str]:
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.strsignal(sig) or f"signal {sig}"
        except ValueError:
            name = f"signal {sig}"
        return [RULE, f"mpirun noticed that process rank {rank} with PID {pid} on node {node} "
                f"exited on signal {sig} ({name}).", RULE]
    return [RULE,
            "Primary job  terminated normally, but 1 process returned",
            "a non-zero exit code. Per user-direction, the job has been aborted.",
            RULE, RULE,
            "mpirun detected that one or more processes exited with non-zero status, "
            "thus causing",
            "the job to be terminated. The first process to do so was:",
            "",
            f"  Process name: [[{os.getpid() % 65536},1],{rank}]",
            f"  Exit code:    {returncode}",
            RULE]


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


# --- running -----------------------------------------------------------------------------------

def local_host() -> str:
    return socket.gethostname().split(".")[0]


def _target_options(domain: int, instance_size: int) -> str:
    return json.dumps({"ipuLinkDomainSize": str(domain), "ipuLinkConfiguration": "default",
                       "ipuLinkTopology": "mesh", "gatewayMode": "true",
                       "instanceSize": str(instance_size)}, separators=(",", ":"))


def check_layout(args: argparse.Namespace, hosts: Sequence[str]) -> None:
    if args.num_replicas % args.num_instances:
        raise PoprunError(f"The number of replicas ({args.num_replicas}) must be divisible by "
                          f"the number of instances ({args.num_instances})")
    if args.num_instances % len(hosts):
        raise PoprunError(f"The number of instances ({args.num_instances}) must be divisible by "
                          f"the number of hosts ({len(hosts)})")
    if args.num_instances % args.num_ilds:
        raise PoprunError(f"The number of instances ({args.num_instances}) must be divisible by "
                          f"the number of ILDs ({args.num_ilds})")
    if (args.only_output_from_instance is not None
            and args.only_output_from_instance >= args.num_instances):
        raise PoprunError(f"--only-output-from-instance={args.only_output_from_instance} names no "
                          f"instance: the instances are 0-{args.num_instances - 1}")


def connect(args: argparse.Namespace, out: Output) -> tuple[VipuClient, str, str]:
    """The V-IPU client and the partition's name, logging as poprun does."""
    host = args.vipu_server_host or os.environ.get("IPUOF_VIPU_API_HOST") or POD_SERVER
    try:
        port = args.vipu_server_port or int(os.environ.get("IPUOF_VIPU_API_PORT") or DEFAULT_PORT)
    except ValueError:
        raise PoprunError("IPUOF_VIPU_API_PORT must be a port number, not "
                          f"'{os.environ['IPUOF_VIPU_API_PORT']}'") from None
    client = VipuClient(host=host, port=port, timeout=args.vipu_server_timeout)
    try:  # the guide's address is the POD's server: resolve the name it stands for
        address = socket.gethostbyname(client.connect_to or POD_SERVER)
    except OSError:
        raise PoprunError(f"Cannot resolve the V-IPU server address '{host}': run poprun on an "
                          "IPU host, or pass --vipu-server-host") from None
    address = shown_address(host, address)
    if not args.vipu_server_host:
        out.log("I", f"V-IPU server address picked up from 'vipu': {address}:{port}")
    name = args.vipu_partition
    if not name:
        name = os.environ.get("IPUOF_VIPU_API_PARTITION_ID")
        if not name:
            raise PoprunError("No V-IPU partition to run on: run poprun inside a job with IPUs "
                              "(srun --ipus=N poprun ...) or pass --vipu-partition=NAME")
        out.log("I", f"Using V-IPU partition {name} as it is the only one available")
    out.log("D", f"Connecting to {address}:{port}")
    return client, name, host


def run(args: argparse.Namespace, command: list[str], out: Output) -> int:
    hosts = [h for h in (args.host or "").split(",") if h] or [local_host()]
    check_layout(args, hosts)
    needed = args.num_replicas * args.ipus_per_replica
    instance_size = needed // args.num_instances
    extra = mpi_exports(args.mpi_global_args, args.mpi_local_args)
    partition_name: str | None = None
    if args.offline_mode:
        out.log("I", "Offline mode: not connecting to a V-IPU server")
        topology = render_topology(hosts, args.num_ilds, args.num_instances, args.num_replicas)
        if args.print_topology or out.verbosity:
            out.block(topology)
    else:
        client, partition_name, vipu_host = connect(args, out)
        try:
            partition = client.partition(partition_name)
        except VipuError as err:
            if err.status == 404:
                raise PoprunError(
                    f"Partition {partition_name} does not exist on the V-IPU server "
                    f"{client.host}:{client.port} (a job's partition exists while the job "
                    "runs: srun --ipus=N poprun ...)") from None
            raise PoprunError(str(err)) from None
        out.log("D", f"Status for partition {partition_name}: OK (error 0)")
        out.log("I", f"Partition {partition_name} already exists and is in state: "
                     f"{partition.get('state', 'PS_ACTIVE')}")
        size = len(partition["ipus"])
        if needed > size:
            raise PoprunError(
                f"Partition {partition_name} has {size} IPUs but {needed} are needed "
                f"({args.num_replicas} replicas x {args.ipus_per_replica} IPUs per replica)")
        if args.num_ilds > 1:
            raise PoprunError(f"Partition {partition_name} spans 1 IPU-Link domain (ILD) but "
                              f"--num-ilds={args.num_ilds} was requested")
        out.log("D", f"The reconfigurable partition {partition_name} is OK")
        if args.print_topology or out.verbosity:
            out.block(render_topology(hosts, args.num_ilds, args.num_instances,
                                      args.num_replicas))
        out.log("D", "Target options from environment: {}")
        out.log("D", f"Target options from V-IPU partition: {_target_options(size, instance_size)}")
        parent_size = 1 << (needed - 1).bit_length()
        parents = devices_of_size(partition_devices(partition["ipus"]), parent_size)
        out.log("D", f"Found {len(parents)} devices with {parent_size} IPUs")
        if not parents:
            raise PoprunError(f"No device with {parent_size} IPUs in partition {partition_name}: "
                              f"{needed} IPUs are used, which Poplar rounds up to a power of two")
        parent = parents[0].id
        out.log("D", f"Attached to device {parent}")
        out.log("I", f"Preparing parent device {parent}")
        out.log("D", f"Device {parent} ipuLinkDomainSize=64, ipuLinkConfiguration=Default, "
                     f"ipuLinkTopology=Mesh, gatewayMode=true, instanceSize={instance_size}")
        out.log("D", f"Target options from Poplar device: {_target_options(64, instance_size)}")
        out.log("D", f"Using target options: {_target_options(size, instance_size)}")
        if args.vipu_server_host or args.vipu_server_port:
            extra.setdefault("IPUOF_VIPU_API_HOST", vipu_host)
            extra.setdefault("IPUOF_VIPU_API_PORT", str(client.port))
    if any(h != local_host() and h not in ("localhost", "127.0.0.1") for h in hosts):
        out.log("W", f"The emulated poprun runs every instance on {local_host()}")
    return launch(args, command, out, partition_name, extra)


def _find_program(program: str) -> str | None:
    """The executable the program resolves to, or None (PermissionError when not runnable)."""
    path = program if "/" in program else shutil.which(program)
    if path is None:
        if "/" not in program and any(
                os.path.exists(os.path.join(d, program))
                for d in os.environ.get("PATH", "").split(os.pathsep)):
            raise PermissionError(program)
        return None
    if not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):
        raise PermissionError(program)
    return path


def launch(args: argparse.Namespace, command: list[str], out: Output,
           partition: str | None, extra: Mapping[str, str]) -> int:
    node = local_host()
    try:
        if _find_program(command[0]) is None:
            out.block(not_found_message(command[0], node))
            out.log("I", f"mpirun (PID {os.getpid()}) terminated with exit code 1")
            return 1
    except PermissionError:
        out.block(no_permission_message(command[0], node))
        out.log("I", f"mpirun (PID {os.getpid()}) terminated with exit code 1")
        return 1

    port = free_port()
    procs: list[subprocess.Popen] = []
    threads: list[threading.Thread] = []
    forwarded: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        forwarded.append(signum)
        _signal_all(procs, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for index in range(args.num_instances):
            env = instance_env(os.environ, index, args.num_instances, args.num_replicas,
                               args.ipus_per_replica, partition, args.executable_cache_path,
                               port, extra)
            try:
                # Each instance leads its own process group: a signal reaches it once, from us.
                proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        process_group=0)
            except OSError as err:
                forward(signal.SIGTERM, None)
                out.block(not_found_message(command[0], node) if isinstance(
                    err, FileNotFoundError) else no_permission_message(command[0], node))
                _wait_all(procs)
                return 1
            procs.append(proc)
            shown = args.only_output_from_instance in (None, index)
            for source, stream, name in ((proc.stdout, out.stdout, "stdout"),
                                         (proc.stderr, out.stderr, "stderr")):
                tagger = LineTagger(f"[1,{index}]<{name}>:".encode())
                thread = threading.Thread(target=pump, args=(source, tagger, out, stream, shown),
                                          daemon=True)
                thread.start()
                threads.append(thread)
        status, first = _supervise(procs, forwarded)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    deadline = time.monotonic() + 5  # a grandchild may hold a pipe open; don't wait on it
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0))
    if first is not None and not forwarded:
        out.block(failure_message(first, procs[first].returncode, procs[first].pid, node))
    out.log("I", f"mpirun (PID {procs[0].pid}) terminated with exit code {status}")
    return status


def _supervise(procs: Sequence[subprocess.Popen], forwarded: list[int]) -> tuple[int, int | None]:
    """Wait for the instances; when one fails, stop the others as mpirun does.

    Returns poprun's exit status (the first failing instance's) and that instance's index.
    """
    first: int | None = None
    stop_at: float | None = None
    while True:
        running = False
        for index, proc in enumerate(procs):
            code = proc.poll()
            if code is None:
                running = True
            elif code != 0 and first is None:
                first = index
        if not running:
            break
        if first is not None and stop_at is None:
            stop_at = time.monotonic() + TERMINATE_GRACE_S
            _signal_all(procs, signal.SIGTERM)
        elif stop_at is not None and time.monotonic() > stop_at:
            _signal_all(procs, signal.SIGKILL)
            stop_at = float("inf")
        time.sleep(0.05)
    status = 0 if first is None else exit_status(procs[first].returncode)
    return status, first


def _signal_all(procs: Sequence[subprocess.Popen], signum: int) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signum)
            except ProcessLookupError:
                pass


def _wait_all(procs: Sequence[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            proc.wait(TERMINATE_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    out = Output(sys.stdout.buffer, sys.stderr.buffer, verbosity=args.verbose)
    try:
        return run(args, command, out)
    except PoprunError as err:
        out.log("E", str(err))
        return 1


if __name__ == "__main__":
    sys.exit(main())
