"""The user driver's pure parts: node lists from the inventory, wait_for, the command lines
it builds, and logging in again when a shared connection was lost (ssh faked)."""

import io
import subprocess
import sys
from pathlib import Path

import pytest
from aitestbed.host import driver
from aitestbed.host.driver import Driver, NodeNames
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.state import ClusterState
from tqdm import tqdm

# What tests/cluster/conftest.py listed by hand before the lists came from inventory/mini.yml.
MINI_NODES = ["cer-cs2-01", "cer-cs2-02", "cer-login-01", "cer-mgmt-01", "gc-login-01",
              "gc-poplar-01", "gc-poplar-02", "gc-slurmctld", "sambanova", "sm-01", "sm-02",
              "sn10-slurmctld", "sn30-r1-h1", "sn30-slurmctld"]
MINI_SAMBANOVA = ["sambanova", "sm-01", "sm-02", "sn10-slurmctld", "sn30-r1-h1",
                  "sn30-slurmctld"]
MINI_LOGIN = ["cer-login-01", "gc-login-01", "sambanova"]


# node lists -------------------------------------------------------------------------------
def test_the_mini_profiles_node_lists_are_the_ones_the_cluster_tests_used():
    names = driver.profile_node_names("mini")
    assert list(names.all) == MINI_NODES
    assert list(names.of("sambanova")) == MINI_SAMBANOVA
    assert list(names.login) == MINI_LOGIN


def test_the_cluster_tests_take_their_node_lists_from_the_inventory():
    from tests.cluster import conftest

    assert (conftest.NODES, conftest.SAMBANOVA_NODES, conftest.LOGIN_NODES) == (
        MINI_NODES, MINI_SAMBANOVA, MINI_LOGIN)


def test_node_names_group_by_system_and_pick_login_nodes_by_class():
    nodes = [Node("a-login", "graphcore", "login", "x"),
             Node("a-ipu", "graphcore", "ipu_node", "x"),
             Node("b-login", "sambanova", "login", "x"),
             Node("b-ctl", "sambanova", "slurmctld", "x")]
    names = driver.node_names(Topology("t", Path("t.yml"), nodes, {}))
    assert names == NodeNames(("a-login", "a-ipu", "b-login", "b-ctl"), ("a-login", "b-login"),
                              {"graphcore": ("a-login", "a-ipu"),
                               "sambanova": ("b-login", "b-ctl")})
    assert names.of("cerebras") == ()


# wait_for ---------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(driver.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(driver.time, "sleep", fake.sleep)
    return fake


def test_wait_for_returns_the_first_true_value(clock):
    answers = iter([None, "", 0, "found"])
    assert driver.wait_for(lambda: next(answers), 60, 0.5) == "found"
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_wait_for_asks_once_even_with_no_time_and_once_after_the_deadline(clock):
    calls = []
    assert driver.wait_for(lambda: calls.append(1) or True, 0) is True
    calls.clear()
    with pytest.raises(driver.TimedOut, match=r"timed out after 3 s waiting for the node DOWN"):
        driver.wait_for(lambda: calls.append(clock.now) and False, 3, 1, "the node DOWN")
    assert calls == [100, 101, 102, 103]


def test_wait_for_fails_as_an_assertion_or_with_the_callers_error(clock):
    assert issubclass(driver.TimedOut, AssertionError)

    class StepError(Exception):
        pass

    with pytest.raises(StepError, match="timed out after 2.5 s waiting for RUNNING"):
        driver.wait_for(lambda: None, 2.5, 1, "RUNNING", error=StepError)


# command lines ----------------------------------------------------------------------------
def test_cli_runs_this_pythons_aitestbed_for_the_cluster():
    assert driver.cli_argv("c1", "up", "--profile", "mini") == [
        sys.executable, "-m", "aitestbed.cli", "--name", "c1", "up", "--profile", "mini"]


def test_ssh_lines_name_the_user_only_when_given():
    assert driver.ssh_argv("/s/ssh_config", "gc-login-01") == [
        "ssh", "-F", "/s/ssh_config", "-o", "BatchMode=yes", "gc-login-01"]
    assert driver.ssh_argv(Path("/s/ssh_config"), "sambanova", "-O", "forward", "-L", "a:1:b:2",
                           user="newhire") == [
        "ssh", "-F", "/s/ssh_config", "-o", "BatchMode=yes", "-l", "newhire", "-O", "forward",
        "-L", "a:1:b:2", "sambanova"]
    assert " ".join(driver.ssh_base("/s/c")) == "ssh -F /s/c -o BatchMode=yes"
    assert driver.scp_argv("/s/c", "/tmp/f.txt", "cer-login-01") == [
        "scp", "-F", "/s/c", "-o", "BatchMode=yes", "/tmp/f.txt", "cer-login-01:~/"]
    assert driver.scp_argv("/s/c", "/tmp/f.txt", "cer-login-01", user="bob")[5:7] == [
        "-o", "User=bob"]
    assert driver.control_argv("/s/c", "sambanova", "exit", "bob") == [
        "ssh", "-F", "/s/c", "-l", "bob", "-O", "exit", "sambanova"]


def test_a_password_login_has_a_connection_of_its_own():
    assert driver.password_login_argv("/s/c", "sambanova", "root", "whoami",
                                      "-o", "NumberOfPasswordPrompts=1") == [
        "ssh", "-F", "/s/c", "-o", "ControlPath=none", "-o", "NumberOfPasswordPrompts=1",
        "-l", "root", "sambanova", "whoami"]
    env = driver.askpass_env("/s/askpass-bob")
    assert (env["SSH_ASKPASS"], env["SSH_ASKPASS_REQUIRE"], env["DISPLAY"]) == (
        "/s/askpass-bob", "force", ":0")


def test_a_hop_writes_the_script_runs_it_in_a_login_shell_and_removes_it():
    script = "set -e\ncat > job.sh <<'EOF'\n#!/bin/sh\nEOF\nsbatch job.sh"
    upload, run = driver.hop_commands("gc-poplar-02", script, name=".step.sh")
    assert upload == f"cat > ~/.step.sh <<'EOF_AITESTBED_STEP'\n{script}\nEOF_AITESTBED_STEP"
    assert run == "ssh gc-poplar-02 bash -l ~/.step.sh; rc=$?; rm -f ~/.step.sh; exit $rc"
    upload, run = driver.hop_commands("sm-01", "true")
    name = upload.split()[2]
    assert name.startswith("~/.aitestbed-step-") and name.endswith(".sh")
    assert f"bash -l {name};" in run
    with pytest.raises(ValueError):
        driver.hop_commands("sm-01", "cat <<EOF_AITESTBED_STEP\nx\nEOF_AITESTBED_STEP")


# the driver with ssh faked ----------------------------------------------------------------
class FakeSsh:
    """subprocess.run for ssh: answers from a list, records each argv and its options."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv, **options):
        self.calls.append((argv, options))
        rc, stderr = self.answers.pop(0)
        return subprocess.CompletedProcess(argv, rc, "out\n", stderr)


@pytest.fixture
def logins(monkeypatch):
    made = []

    def log_in(state, host, user, *options):
        made.append((state.name, host, user, options))
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(driver.sshconfig, "log_in", log_in)
    return made


def test_a_lost_connection_means_a_new_passcode_login_and_one_more_try(monkeypatch, logins):
    ssh = FakeSsh((255, "Permission denied (keyboard-interactive).\n"), (0, ""))
    monkeypatch.setattr(driver.subprocess, "run", ssh)
    monkeypatch.setattr(Driver, "default_user", lambda self: "learner")  # the record's user
    user = Driver("c1", login_options=("-o", "ControlPersist=yes"), relogin=True)
    result = user.ssh("gc-login-01", "hostname", timeout=60)
    assert result.returncode == 0
    config = str(ClusterState("c1").ssh_config_path)
    assert [argv for argv, _ in ssh.calls] == [
        ["ssh", "-F", config, "-o", "BatchMode=yes", "gc-login-01", "hostname"]] * 2
    assert ssh.calls[0][1]["stdin"] is subprocess.DEVNULL and ssh.calls[0][1]["timeout"] == 60
    with pytest.raises(IndexError):  # one login, one more try: nothing else was run
        user.ssh("sambanova", "true")
    assert logins == [("c1", "gc-login-01", "learner", ("-o", "ControlPersist=yes"))]


def test_no_new_login_without_relogin_or_with_options_or_for_other_refusals(monkeypatch, logins):
    refused = (255, "Permission denied (keyboard-interactive).\n")
    ssh = FakeSsh(refused, refused, (255, "Permission denied (publickey).\n"))
    monkeypatch.setattr(driver.subprocess, "run", ssh)
    assert Driver("c1").ssh("gc-login-01", "true").returncode == 255
    again = Driver("c1", relogin=True)
    assert again.ssh("gc-login-01", "true", "-l", "root").returncode == 255
    assert again.ssh("gc-login-01", "true").returncode == 255
    assert logins == [] and len(ssh.calls) == 3


def test_input_goes_to_the_command_and_run_joins_the_output(monkeypatch):
    ssh = FakeSsh((0, "warning\n"), (3, "err\n"))
    monkeypatch.setattr(driver.subprocess, "run", ssh)
    user = Driver("c1", user="bob")
    user.ssh("cer-login-01", "bash -s", input="echo hi\n")
    argv, options = ssh.calls[0]
    assert argv[-4:] == ["-l", "bob", "cer-login-01", "bash -s"]
    assert options["input"] == "echo hi\n" and "stdin" not in options
    assert user.run("cer-login-01", "false") == (3, "out\nerr\n")


def test_a_hop_stops_when_the_script_cannot_be_written(monkeypatch):
    ssh = FakeSsh((1, "No space left on device\n"))
    monkeypatch.setattr(driver.subprocess, "run", ssh)
    result = Driver("c1").hop("sambanova", "sm-01", "true", timeout=900)
    assert result.returncode == 1 and len(ssh.calls) == 1
    ssh = FakeSsh((0, ""), (0, ""))
    monkeypatch.setattr(driver.subprocess, "run", ssh)
    Driver("c1").hop("sambanova", "sm-01", "true", timeout=900)
    (upload, first), (run, second) = ssh.calls
    assert upload[-1].startswith("cat > ~/.aitestbed-step-") and first["timeout"] == 120
    assert run[-1].startswith("ssh sm-01 bash -l ~/.aitestbed-step-") and second["timeout"] == 900


# what a user reads ------------------------------------------------------------------------
def tutorial_bars() -> str:
    """tqdm's output for the MNIST tutorial's bars: Epochs, with the Graph compilation bar
    drawn nested in its first step (as PopTorch compiles on the first call)."""
    out = io.StringIO()
    for epoch in tqdm(range(3), desc="Epochs", file=out, mininterval=0):
        if epoch == 0:
            with tqdm(desc="Graph compilation", total=100, file=out, mininterval=0) as bar:
                for _ in range(100):
                    bar.update(1)
    return out.getvalue()


def test_the_terminal_view_shows_each_progress_bar_once_in_its_last_state():
    raw = tutorial_bars()
    # tqdm draws a bar's final state twice (its last step, then on close) with "\r"
    # between: the replay's splitlines() reduction printed the final Epochs bar twice.
    replay = [line.split("\r")[-1] for line in raw.splitlines()]
    assert sum(line.startswith("Epochs: 100%") for line in replay) == 2
    view = driver.terminal_view(raw).splitlines()
    # The compilation bar, closed, is drawn where the Epochs bar was, which goes on below.
    assert [line.split("|")[0] for line in view] == ["Graph compilation: 100%", "Epochs: 100%"]
    assert "100/100" in view[0] and "3/3" in view[1]


def test_the_terminal_view_applies_the_control_characters():
    assert driver.terminal_view("10%\r100%\n") == "100%\n"
    assert driver.terminal_view("one\ntwo\x1b[Ax\n\n") == "onex\ntwo\n"
    assert driver.terminal_view("abc\x1b[K\rx\x1b[K") == "x"
    assert driver.terminal_view("\x1b[1mhi\x1b[0m\x08!") == "h!"
