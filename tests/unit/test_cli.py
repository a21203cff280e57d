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
