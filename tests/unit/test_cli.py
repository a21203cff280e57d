"""Bad input gets one clear line and a non-zero exit, never a traceback."""

import subprocess
import sys

import pytest


def aitestbed(*args, env_extra=None):
    import os

    env = {**os.environ, **(env_extra or {})}
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
    result = aitestbed("--name", "x", "up", "--profile", "mini",
                       env_extra={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.returncode == 1
    assert "no Docker engine is reachable" in result.stderr and "make engine" in result.stderr
    assert "Traceback" not in result.stderr


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
