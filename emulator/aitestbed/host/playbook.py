"""Run ansible-playbook the way the project measured fastest: Mitogen's strategy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import project_root
from aitestbed.host.paths import build_root

# The playbooks that change accounts only (the accounts and sshd roles' account tasks): they
# copy nothing from the host's build/, so they need not rebuild it first.
ACCOUNT_PLAYBOOKS = frozenset({"onboard-user", "offboard-user", "join-project",
                               "expire-project"})


def copies_host_artifacts(playbook: str) -> bool:
    """Whether the playbook's roles copy build/ (the wheelhouse, the vendor SDKs' files)."""
    return Path(playbook).name.removesuffix(".yml") not in ACCOUNT_PLAYBOOKS


def ansible_env() -> dict[str, str]:
    # the roles copy what the host built from AITESTBED_BUILD_DIR (paths.build_root)
    env = {**os.environ, "ANSIBLE_CONFIG": str(project_root() / "ansible.cfg"),
           "AITESTBED_BUILD_DIR": str(build_root())}
    try:
        import ansible_mitogen  # noqa: PLC0415 - optional speed-up, pinned in requirements.txt
    except ImportError:
        return env
    strategy_dir = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    env.setdefault("ANSIBLE_STRATEGY_PLUGINS", str(strategy_dir))
    env.setdefault("ANSIBLE_STRATEGY", "mitogen_linear")
    return env


def playbook_path(playbook: str) -> Path:
    """The file of a playbook named on the command line (a path, or a name in playbooks/)."""
    path = Path(playbook)
    if not path.is_file():
        path = project_root() / "playbooks" / (playbook if playbook.endswith(".yml")
                                                else f"{playbook}.yml")
    if not path.is_file():
        known = sorted(p.stem for p in (project_root() / "playbooks").glob("*.yml"))
        raise AitestbedError(f"unknown playbook {playbook!r}: choose one of {', '.join(known)}")
    return path


def run_playbook(playbook: str, inventories: list[Path], *, extra_vars: list[str] = (),
                 limit: str | None = None, args: list[str] = (), log: Path | None = None,
                 on_task: Callable[[str], None] | None = None
                 ) -> subprocess.CompletedProcess:
    """ansible-playbook PLAYBOOK; its output to `log` when given (else to this terminal),
    and each task's name to `on_task` as it starts (`role : name`)."""
    path = playbook_path(playbook)
    cmd = [str(Path(sys.executable).with_name("ansible-playbook")), str(path)]
    for inventory in inventories:
        cmd += ["-i", str(inventory)]
    for extra in extra_vars:
        cmd += ["-e", extra]
    if limit:
        cmd += ["--limit", limit]
    cmd += list(args)
    if log is None:
        return subprocess.run(cmd, env=ansible_env(), check=False)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        if on_task is None:
            return subprocess.run(cmd, env=ansible_env(), stdout=out, stderr=subprocess.STDOUT,
                                  check=False)
        with subprocess.Popen(cmd, env=ansible_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace") as process:
            for line in process.stdout:
                out.write(line)
                if line.startswith("TASK [") and "]" in line:
                    on_task(line[len("TASK ["):line.index("]")])
        return subprocess.CompletedProcess(cmd, process.returncode)
