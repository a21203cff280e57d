"""The emulated SambaFlow runtime this process talks to: its clock, its node, its logs.

The numerics run on the host CPU with PyTorch. Device time comes from the timing
model (aitestbed.sambanova.timing) and every progress bar in the process counts
it: on the real system wall time and device time are the same thing.

What the runtime library itself prints (the session's "PEF File" line and "Log ID
initialized") goes through C's stdio on the real system: on a terminal it shows at
once, but into a pipe or file (srun, sbatch --output) it is flushed when the process
exits, after everything Python printed, which is where the guide's outputs show it.
We do the same.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import os
import pwd
import sys
from dataclasses import dataclass

from aitestbed.devices.host import FacadeRuntime, start

from ._errors import SambaError

PLATFORM_ENV = "AITESTBED_SN_PLATFORM"
LOG_FILE_ENV = "SF_RNT_LOG_FILE"
LOG_LEVEL_ENV = "SF_RNT_LOG_LEVEL"
DEFAULT_LOG_FILE = "/var/log/sambaflow/runtime/sn.log"
LOG_LEVELS = {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "WARNING": 3, "ERROR": 4,
              "CRITICAL": 5, "OFF": 6}


@dataclass(frozen=True)
class Platform:
    """The DataScale system this node is (SN30-8: 8 tiles per RDU; SN10-8: 4)."""

    name: str  # "SN30" or "SN10"
    tiles_per_rdu: int
    node: str = ""

    @property
    def sn10(self) -> bool:
        return self.tiles_per_rdu == 4


def _platform_from_env() -> Platform:
    raw = os.environ.get(PLATFORM_ENV, "").upper()
    if "10" in raw:
        return Platform("SN10", 4)
    return Platform("SN30", 8)


class Runtime(FacadeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self._platform: Platform | None = None
        self._deferred: list[str] = []
        self._deferred_registered = False

    # -- the node ------------------------------------------------------------------------
    def platform(self) -> Platform:
        """SN30 or SN10: snd says when it answers (an RDU node), else AITESTBED_SN_PLATFORM."""
        if self._platform is None:
            self._platform = _platform_from_env()
            try:
                from aitestbed.sambanova.snd.client import SndClient

                node = SndClient().node()
                tiles = int(node["tiles_per_rdu"])
                self._platform = Platform("SN10" if tiles == 4 else "SN30", tiles,
                                          str(node.get("node", "")))
            except Exception:  # noqa: BLE001 - no snd (compile host, tests): the fallback
                pass
        return self._platform

    # -- what the SambaFlow Python layer prints ----------------------------------------------
    def samba_line(self, level: str, component: str, message: str, logger: str = "Default") -> str:
        """`[Info][SAMBA]# msg` on SN30, `[Info][SAMBA][Default] # msg` on SN10."""
        if self.platform().sn10:
            return f"[{level}][{component}][{logger}] # {message}"
        return f"[{level}][{component}]# {message}"

    # -- what the runtime library prints and logs -----------------------------------------------
    def lib_timestamp(self, now: _dt.datetime | None = None) -> str:
        now = now or _dt.datetime.now()
        if self.platform().sn10:  # 2021-6-10 10:52:28
            return f"{now.year}-{now.month}-{now.day} {now.hour}:{now.minute:02}:{now.second:02}"
        return now.strftime("%Y-%m-%dT%H:%M:%S")

    def lib_line(self, level: str, component: str, message: str) -> str:
        return f"{self.lib_timestamp()} : [{level}][{component}][{os.getpid()}]: {message}"

    def c_stdout(self, line: str) -> None:
        """Print as the C runtime does: now on a terminal, at exit into a pipe or file."""
        try:
            tty = sys.stdout.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            return
        self._deferred.append(line)
        if not self._deferred_registered:
            self._deferred_registered = True
            atexit.register(self.flush_c_stdout)

    def flush_c_stdout(self) -> None:
        lines, self._deferred = self._deferred, []
        if lines:
            try:
                sys.stdout.flush()
                sys.stdout.write("".join(line + "\n" for line in lines))
                sys.stdout.flush()
            except (OSError, ValueError):
                pass

    @staticmethod
    def log_path() -> str:
        return os.environ.get(LOG_FILE_ENV) or DEFAULT_LOG_FILE

    def log(self, level: str, component: str, message: str) -> None:
        """Append to the runtime log (sn.log) at or above SF_RNT_LOG_LEVEL (default INFO).

        The file is shared by every user of the node: made 0666 when we create it; a
        directory we cannot write to means no log, silently, as before the runtime starts.
        """
        threshold = LOG_LEVELS.get(os.environ.get(LOG_LEVEL_ENV, "INFO").strip().upper(), 2)
        if LOG_LEVELS.get(level.upper(), 2) < threshold:
            return
        path = self.log_path()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                os.fchmod(fd, 0o666)
            except OSError:
                pass
        except FileExistsError:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            except OSError:
                return
        except OSError:
            return
        try:
            os.write(fd, (self.lib_line(level.upper(), component, message) + "\n").encode())
        except OSError:
            pass
        finally:
            os.close(fd)

    @staticmethod
    def user() -> str:
        try:
            return pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            return os.environ.get("USER", str(os.getuid()))

    # -- the host CPUs ----------------------------------------------------------------------------
    def torch_threads(self) -> int:
        """The CPUs this task may use, shared among the job step's tasks on the node, and
        never more threads than CPUs (the guide's OMP_NUM_THREADS=16 is for a 128-CPU
        node). tune_cpu gives them to torch (samba's import does, before any thread)."""
        cpus = max(1, len(os.sched_getaffinity(0)))
        local_tasks = _tasks_on_this_node()
        if local_tasks > 1 and cpus > 1:
            cpus = max(1, cpus // local_tasks)
        wanted = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        return min(cpus, int(wanted)) if wanted.isdigit() and int(wanted) > 0 else cpus


def _tasks_on_this_node() -> int:
    """Tasks of this Slurm job step on this node ("8(x2)" -> 8), 1 outside a step."""
    raw = os.environ.get("SLURM_STEP_TASKS_PER_NODE") or ""
    if not raw and "SLURM_STEP_ID" in os.environ:
        raw = os.environ.get("SLURM_TASKS_PER_NODE", "")
    digits = ""
    for char in raw:
        if not char.isdigit():
            break
        digits += char
    return int(digits) if digits else 1


def _install_excepthook() -> None:
    """Our errors end the process as the SambaFlow stack's do: the message, status 1."""
    previous = sys.excepthook

    def hook(kind, value, traceback):
        if isinstance(value, SambaError):
            try:
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
            sys.stderr.write(f"{runtime.samba_line('Error', 'SAMBA', str(value))}\n")
            sys.stderr.flush()
            return
        previous(kind, value, traceback)

    sys.excepthook = hook


runtime = start(Runtime)
_install_excepthook()
