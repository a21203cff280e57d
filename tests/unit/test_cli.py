"""Bad input gets one clear line and a non-zero exit, never a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def aitestbed(*args, env_extra=None):
    import os

    # This checkout's code, whichever checkout the venv was installed from.
    path = os.pathsep.join(p for p in (str(EMULATOR), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "aitestbed.cli", *args], capture_output=True,
                          text=True, env=env, check=False)


@pytest.mark.parametrize(("args", "message"), [
    (["--name", "Bad_Name", "status"], "invalid cluster name"),
    (["--name", "nosuch", "status"], "cluster 'nosuch' does not exist"),
    (["--name", "nosuch", "down"], "cluster 'nosuch' does not exist"),
    (["--name", "nosuch", "ssh-config"], "cluster 'nosuch' does not exist"),
    (["up", "--profile", "huge"], "unknown profile 'huge'"),
    (["up", "--systems", "cray"], "unknown system 'cray'"),
])
def test_bad_input_is_one_line_and_non_zero(args, message):
    result = aitestbed(*args)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_no_engine_reachable_says_what_to_do():
    import os

    result = aitestbed("--name", "x", "up", "--profile", "mini",
                       env_extra={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.returncode == 1
    assert "no Docker engine is reachable" in result.stderr and "make engine" in result.stderr
    assert "Traceback" not in result.stderr
    # Said before anything is made: no state, no file systems mounted for the cluster.
    state = Path(os.environ["XDG_STATE_HOME"]) / "aitestbed" / "x"
    assert not state.exists()
    assert str(state) not in Path("/proc/self/mounts").read_text()


def test_unknown_flag_uses_clicks_usage_error():
    result = aitestbed("up", "--bogus")
    assert result.returncode == 2
    assert "No such option: --bogus" in result.stderr


def test_help_lists_every_command():
    result = aitestbed("--help")
    for command in ("up", "down", "destroy", "status", "wait", "ssh-config", "shell"):
        assert f"  {command} " in result.stdout



def _errors():
    import click
    from aitestbed.host.errors import AitestbedError
    from docker.errors import DockerException

    return {"ours": AitestbedError("no such cluster"), "engine": DockerException("gone"),
            "usage": click.UsageError("no such option: -x"), "interrupt": KeyboardInterrupt(),
            "abort": click.exceptions.Abort()}


@pytest.mark.parametrize(("raised", "status", "stderr"), [
    ("ours", 1, "prog: error: no such cluster\n"),
    ("engine", 1, "prog: error: Docker engine: gone\n"),
    ("usage", 2, "Usage: prog [OPTIONS]\nTry 'prog --help' for help.\n\n"
                 "Error: no such option: -x\n"),
    ("interrupt", 130, "\n"),  # click ends the ^C line
    ("abort", 130, ""),
])
def test_run_click_ends_every_program_the_same_way(raised, status, stderr, capsys, monkeypatch):
    """`aitestbed` (cli.main) and `rehearse` (rehearse.run) both end through run_click."""
    import click
    from aitestbed.host.errors import run_click

    @click.command()
    def command():
        raise _errors()[raised]

    monkeypatch.setattr(sys, "argv", ["prog"])
    with pytest.raises(SystemExit) as end:
        run_click(command, "prog")
    assert end.value.code == status
    assert capsys.readouterr().err == stderr


@pytest.mark.parametrize("args", [["wait", "--timeout", "-5"], ["up", "--timeout", "-1"]])
def test_a_negative_timeout_is_refused(args):
    result = aitestbed(*args, env_extra=NO_ENGINE)
    assert result.returncode == 2
    assert "Invalid value for '--timeout': -" in result.stderr
    assert "Traceback" not in result.stderr


def test_ssh_config_to_a_missing_directory_is_one_clear_line(isolated_state):
    from aitestbed.host import inventory
    from aitestbed.host.state import ClusterRecord, ClusterState

    topology = inventory.load("mini", ["graphcore"])
    state = ClusterState("unit")
    record = ClusterRecord("unit", "mini", "", ["graphcore"], "learner")
    state.save(record)
    state.prepare(topology, record)
    result = aitestbed("--name", "unit", "ssh-config", "-o", "/nonexistent/dir/file",
                       env_extra=NO_ENGINE)
    assert result.returncode == 1
    assert result.stderr.strip() == ("aitestbed: error: cannot write /nonexistent/dir/file: "
                                     "No such file or directory")


def test_shell_as_a_user_is_a_login_of_that_user(monkeypatch):
    """`shell -u USER` sets HOME, USER and LOGNAME and starts in the home, as a login does
    (docker exec -u kept root's HOME=/root and USER unset)."""
    from aitestbed.cli import login_command
    from aitestbed.host.provider.docker import DockerProvider

    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    docker = DockerProvider(client=object())
    argv = docker.terminal_argv("c", "gc-login-01", login_command(("echo", "$USER"), "learner"),
                                tty=False)
    assert argv == ["/usr/bin/docker", "exec", "-i", "c-gc-login-01",
                    "runuser", "-l", "learner", "-c", "echo $USER"]
    assert docker.terminal_argv("c", "n", login_command((), "learner"), tty=True) == [
        "/usr/bin/docker", "exec", "-i", "-t", "c-n", "runuser", "-l", "learner"]
    assert login_command((), None) == ["bash", "-l"]


def test_only_playbooks_whose_roles_copy_build_rebuild_it_first():
    from aitestbed.host.playbook import copies_host_artifacts

    assert not any(copies_host_artifacts(p) for p in (
        "onboard-user", "offboard-user.yml", "playbooks/join-project.yml", "expire-project"))
    assert all(copies_host_artifacts(p) for p in ("site", "graphcore", "playbooks/image.yml"))


def test_an_unknown_playbook_is_refused_before_anything_is_built(monkeypatch):
    """C19: not after the SDK/TensorBoard files of build/ were prepared."""
    from aitestbed import cli as cli_module
    from aitestbed.host import images
    from aitestbed.host.state import ClusterRecord, ClusterState
    from click.testing import CliRunner

    ClusterState("unit").save(ClusterRecord("unit", "mini", "", None, "learner"))
    built = []
    monkeypatch.setattr(images, "build_host_artifacts", built.append)
    result = CliRunner().invoke(cli_module.cli, ["--name", "unit", "playbook", "nosuchplaybook"])
    assert result.exit_code != 0
    assert "unknown playbook 'nosuchplaybook': choose one of" in str(result.exception)
    assert "site" in str(result.exception)
    assert built == []
