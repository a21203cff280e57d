"""What a new user meets in the first minutes: node logs that stay quiet, daemons that
come back when they die, and the README's logins going through after one passcode
login and `aitestbed login`."""

import re
import subprocess
import time
from datetime import datetime

import docker
import pytest
from aitestbed.host.driver import wait_for

from .conftest import LOGIN_NODES

pytestmark = pytest.mark.presubmit

FATAL = re.compile(r"^runsv \S+: fatal: .*$", re.M)
SV_PID = re.compile(r"^run: \S+: \(pid (\d+)\)")


def started_at(container) -> datetime:
    return datetime.fromisoformat(container.attrs["State"]["StartedAt"][:26].rstrip("Z") + "+00:00")


def test_no_service_is_restarted_over_and_over(cluster, node):
    container = docker.from_env().containers.get(cluster.container(node))
    started = started_at(container)
    age = (datetime.now(started.tzinfo) - started).total_seconds()
    if age < 60:  # the measure: a node that has run a minute
        time.sleep(60 - age)
    log = container.logs(since=started).decode(errors="replace")
    assert FATAL.findall(log) == []
    services = cluster.host(node).check_output("ls /etc/service").split()
    assert "ssh" not in services and "default-syslog" not in services
    assert "sshd" in services and "syslog" in services


def service_pid(host, service: str) -> int | None:
    match = SV_PID.match(host.run(f"sv status /etc/service/{service}").stdout)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("service", ["sshd", "syslog"])
def test_a_killed_daemon_comes_back(cluster, service):
    host = cluster.host("gc-poplar-01")  # no user logs in there
    before = service_pid(host, service)
    assert before
    host.run(f"kill -9 {before}")
    after = wait_for(lambda: (pid := service_pid(host, service)) != before and pid, 10, 0.2,
                     f"runit to start {service} again")
    assert after != before
    wait_for(lambda: host.run("/usr/local/sbin/aitestbed-node-health").rc == 0, 15, 0.5,
             "the node to be healthy again")


def test_logger_reaches_the_node_s_syslog(cluster):
    host = cluster.host("gc-login-01")
    mark = f"first-minutes-{time.time_ns()}"
    result = cluster.ssh("gc-login-01", f"logger -t exercise {mark}")
    assert result.returncode == 0, result.stderr
    wait_for(lambda: mark in host.run("cat /var/log/syslog.d/current").stdout, 10, 0.2,
             "the message in /var/log/syslog.d/current")


def test_after_aitestbed_login_every_readme_login_goes_through(cluster):
    for host in [*LOGIN_NODES, "cerebras"]:
        cluster.log_out(host)
    first = cluster.log_in("gc-login-01")  # the user's own passcode login
    assert first.returncode == 0, first.stderr
    login = cluster.cli("login", check=False, timeout=400)
    assert login.returncode == 0, login.stderr
    expected = {"gc-login-01": "gc-login-01", "sambanova": "sambanova",
                "cer-login-01": "cer-login-01", "cerebras": "cer-login-01",
                "cerebras.ai.alcf.anl.gov": "cer-login-01",
                "gc-login-01.ai.alcf.anl.gov": "gc-login-01"}
    for name, node in expected.items():
        result = subprocess.run(["ssh", "-F", str(cluster.ssh_config), "-o", "BatchMode=yes",
                                 name, "hostname"], capture_output=True, text=True, timeout=30,
                                check=False)
        assert (result.returncode, result.stdout.strip()) == (0, node), (name, result.stderr)
