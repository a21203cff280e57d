import pytest


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    """Every unit test gets its own state directory and no engine."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("AITESTBED_USER", raising=False)
    monkeypatch.delenv("AITESTBED_CLUSTER", raising=False)
    return tmp_path / "state"


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory):
    """Real MNIST digits, built once per session from the pinned source archive.

    The archive is the one the image build uses, from the same cache
    (build/downloads, through sdk_artifacts.mnist_source): on a fresh checkout the
    first run fetches it (a few MB, checked against its sha512), later runs and the
    image build reuse it.
    """
    from aitestbed.datasets import mnist
    from aitestbed.host.inventory import project_root
    from aitestbed.host.sdk_artifacts import mnist_source
    from filelock import FileLock

    downloads = project_root() / "build" / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(downloads / ".unit-tests.lock"):  # xdist's workers: one fetches
            tarball = mnist_source()
    except (OSError, mnist.DatasetError) as err:
        pytest.fail(f"cannot fetch the MNIST source archive {mnist.SOURCE_URL} into "
                    f"build/downloads: {err}", pytrace=False)
    root = tmp_path_factory.mktemp("mnist")
    mnist.build(tarball, root)
    return root


@pytest.fixture
def allocation(monkeypatch):
    """A job holding `count` IPUs of the POD (as its V-IPU partition would), for poptorch."""
    from aitestbed.devices.base import Allocation
    from aitestbed.graphcore import ipu
    from poptorch._runtime import runtime

    def hold(count: int) -> Allocation:
        held = Allocation(system=ipu.BOW_POD64, name="slurm_1", chip_ids=tuple(range(count)))
        monkeypatch.setattr(runtime, "_allocation", held)
        monkeypatch.setattr(runtime, "_allocation_read", True)
        monkeypatch.setattr(runtime, "forget_allocation", lambda: None)
        return held
    monkeypatch.delenv("POPTORCH_CACHE_DIR", raising=False)
    monkeypatch.delenv("POPTORCH_IPU_MODEL", raising=False)
    return hold


SND_JOB = "4242"


@pytest.fixture
def snd(tmp_path, monkeypatch):
    """The node's snd on a socket of our own, with one RDU held by job SND_JOB (ours)."""
    import os
    import pwd
    import threading

    from aitestbed.sambanova.snd.server import SndServer

    socket_path = tmp_path / "snd.sock"
    server = SndServer(socket_path, tmp_path / "snd-state", node="sn30-r1-h1", tiles_per_rdu=8)
    with server.lock:
        server.rdus.reserve(SND_JOB, pwd.getpwuid(os.getuid()).pw_name, 1)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AITESTBED_SND_SOCKET", str(socket_path))
    monkeypatch.setenv("SLURM_JOB_ID", SND_JOB)
    yield server
    server.shutdown()
    server.server_close()
