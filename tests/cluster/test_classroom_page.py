"""The instructor's page against the session's cluster, in a real headless browser
(Debian's Chromium): it loads, a learner who passes an exercise turns green within one
refresh, and its screenshot is kept (build/test-artifacts/classroom-page.png)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from aitestbed.classroom.snapshot import PASSED, Watcher
from aitestbed.classroom.web import PageServer
from aitestbed.exercises.session import Session

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

INTERVAL = 2.0
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
SCREENSHOT = ARTIFACTS / "classroom-page.png"
LOGIN, GC_LOGIN, GC_NODE = "cer-login-01", "gc-login-01", "gc-poplar-02"
LOGINS = {"cerebras": LOGIN, "graphcore": GC_LOGIN, "sambanova": "sambanova"}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CELL = re.compile(r'data-status="([a-z ]+)" data-user="([^"]+)" data-exercise="([^"]+)"')


def browse(profile: Path, url: str, *options: str) -> str:
    """What headless Chromium printed for url (the DOM with --dump-dom)."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={profile}", *options, url],
        capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def statuses(dom: str) -> dict[tuple[str, str], str]:
    """(user, exercise) -> the status of its cell, as the browser got the page."""
    return {(m.group(2), m.group(3)): m.group(1) for m in CELL.finditer(dom)}


@pytest.fixture
def page(cluster, tmp_path):
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium): the page is "
                    "tested in a real browser")
    server = PageServer(Watcher.for_cluster(cluster.name, INTERVAL), "127.0.0.1", 0).start()
    try:
        deadline = time.monotonic() + 60
        while server.watcher.cycles < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.watcher.cycles >= 1, server.watcher.page.errors
        yield server
    finally:
        server.stop()


def pass_an_exercise(cluster, cells: dict[tuple[str, str], str]):
    """An exercise a learner on the page has not passed, and how they pass it now:
    a room's learner logs in for the first time; else the practice user takes the
    second step to an IPU host, or copies the file data-transfer gave them."""
    accounts = {u["name"]: u for u in Session(cluster.name).users()}
    for user in sorted({user for user, _ in cells}, reverse=True):
        groups = (accounts.get(user) or {}).get("groups") or []
        login = next((node for system, node in LOGINS.items() if system in groups), None)
        if (cells.get((user, "first-login")) != PASSED and login
                and cluster.state.askpass_path(user).exists()):
            def first_login(user=user, login=login):
                result = cluster.log_in(login, user)
                assert result.returncode == 0, result.stderr
            return (user, "first-login", first_login,
                    lambda user=user, login=login: cluster.log_out(login, user))
    user = cluster.user
    if cells.get((user, "graphcore-login")) not in (None, PASSED):
        def hop():
            rc, out = cluster.run(GC_LOGIN, f"ssh {GC_NODE} true")
            assert rc == 0, out
        return user, "graphcore-login", hop, lambda: None
    if cells.get((user, "data-transfer")) not in (None, PASSED):
        def copy():
            cluster.cli("exercise", "start", "data-transfer")
            payload = cluster.state.root / "exercises" / f"{user}-payload.txt"
            scp = cluster.driver.scp(payload, LOGIN, timeout=60)
            assert scp.returncode == 0, scp.stderr
            cluster.cli("exercise", "check", "data-transfer")
        return user, "data-transfer", copy, lambda: None
    pytest.fail("no learner on the page has an exercise left to pass quickly (first-login of a "
                "room's learner, or the practice user's graphcore-login or data-transfer): "
                f"run on a fresh cluster; the page shows {sorted(cells.items())[:6]}…")


def test_the_page_in_a_browser_turns_a_learner_green_within_one_refresh(cluster, page,
                                                                         tmp_path):
    profile = tmp_path / "chromium"
    dom = browse(profile, page.url, "--dump-dom")
    assert f"<title>{cluster.name}: the room</title>" in dom
    assert f'<meta http-equiv="refresh" content="{int(INTERVAL)}">' in dom
    for system in ("cerebras", "graphcore", "sambanova"):
        assert f'id="panel-{system}"' in dom
    assert "CS-2s in use" in dom and "IPUs; jobs:" in dom and "RDUs; jobs:" in dom
    cells = statuses(dom)
    assert cells, dom[-3000:]
    assert page.watcher.page.errors == []

    user, exercise, do_it, undo = pass_an_exercise(cluster, cells)
    assert cells[(user, exercise)] != PASSED
    try:
        do_it()
        done = time.time()
        # One refresh: the next snapshot taken after the learner passed shows it.
        deadline = time.monotonic() + INTERVAL + 15
        while page.watcher.page.taken <= done and time.monotonic() < deadline:
            time.sleep(0.1)
        assert page.watcher.page.taken > done, "no snapshot within one refresh"
        waited = page.watcher.page.taken - done
        # The page as the browser shows it now, kept as a screenshot of that same load.
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        SCREENSHOT.unlink(missing_ok=True)
        dom = browse(profile, page.url, "--dump-dom", f"--screenshot={SCREENSHOT}",
                     "--window-size=1400,900", "--hide-scrollbars")
        assert statuses(dom)[(user, exercise)] == PASSED, (
            f"{user} {exercise} not green {waited:.1f} s after passing")
        assert waited <= INTERVAL + 1
        assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        undo()


def test_served_on_every_address_the_page_refuses_the_clusters_nodes_and_jobs(cluster):
    """D11: `classroom serve --host 0.0.0.0` is reached from a node (and a job on it)
    through its network's gateway, the host's address there: those get 403, not the
    room's names and queues; this machine itself still gets the page."""
    import docker  # noqa: PLC0415
    from aitestbed.classroom.web import REFUSED, cluster_networks  # noqa: PLC0415
    from aitestbed.host.naming import network_name  # noqa: PLC0415

    gateway = docker.from_env().networks.get(network_name(cluster.name)).attrs[
        "IPAM"]["Config"][0]["Gateway"]
    server = PageServer(Watcher.for_cluster(cluster.name, INTERVAL), "0.0.0.0", 0,
                        refused=cluster_networks()).start()
    try:
        url = f"http://{gateway}:{server.port}/api/room.json"
        script = ("import urllib.request, urllib.error\n"
                  f"try:\n    print(urllib.request.urlopen('{url}', timeout=10).status)\n"
                  "except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())\n")
        rc, out = cluster.run(GC_LOGIN, f"cat > ~/d11.py <<'EOF'\n{script}EOF")
        assert rc == 0, out
        for command in ("python3 ~/d11.py", "srun --ipus=1 python3 ~/d11.py"):
            rc, out = cluster.run(GC_LOGIN, command)
            assert out.startswith("403 " + REFUSED.strip()), (command, out)
        import urllib.request  # noqa: PLC0415

        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/room.json",
                                    timeout=10) as answer:
            assert answer.status == 200
    finally:
        server.stop()
