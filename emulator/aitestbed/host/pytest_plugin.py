"""The pytest plugin (entry point `pytest11: aitestbed`): a project's tests run its job
scripts on the testbed.

    def test_training_script(testbed):
        assert testbed.run("submit.sh", system="graphcore").state == "COMPLETED"

`testbed` (session scope) uses the running cluster named by --aitestbed-cluster or
AITESTBED_CLUSTER; without one it brings up a mini cluster of its own with the systems
of --aitestbed-systems / AITESTBED_SYSTEMS / the `aitestbed_systems` ini value (default:
every system of the `mini` profile; with a system only today's profile has, such as
metis, `alcf-2026-mini`) and destroys it at the end of the session. `testbed.run(...)`
returns what `aitestbed run --json` prints, as a RunReport.

A system's own fixtures come from its registry entry (`System.pytest_plugin`): Metis's
`metis` (aitestbed.host.systems.metis_pytest) gives the gateway on 127.0.0.1 and a token:

    def test_agent(metis, monkeypatch):
        for key, value in metis.environment.items():  # OPENAI_BASE_URL, OPENAI_API_KEY,
            monkeypatch.setenv(key, value)              # SSL_CERT_FILE, ...
        client = OpenAI()

Imports of the host code happen when the fixture is used: a test session that does
not ask for `testbed` pays only for reading the registry.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from aitestbed.host import systems as system_registry

# each system's fixtures (the registry's pytest_plugin modules), loaded with this plugin
pytest_plugins = system_registry.pytest_plugins()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aitestbed", "the emulated ALCF AI Testbed")
    group.addoption("--aitestbed-cluster", default=None, metavar="NAME",
                    help="use this running cluster (default: $AITESTBED_CLUSTER; else bring "
                         "up a mini cluster for the session)")
    group.addoption("--aitestbed-systems", default=None, metavar="LIST",
                    help="systems of the session's own cluster, a comma-separated subset of "
                         f"{','.join(system_registry.names())} (default: $AITESTBED_SYSTEMS, the "
                         "aitestbed_systems ini value, or all)")
    parser.addini("aitestbed_systems", "systems of the session's own cluster", default="")


class Testbed:
    """A cluster for the test session; `run` is `aitestbed run` as a function."""

    def __init__(self, name: str, output_root: Path):
        self.name = name
        self.output_root = output_root

    def run(self, *scripts: str, system: str, user: str | None = None,
            directory: str | os.PathLike = ".", output_dir: str | os.PathLike | None = None,
            timeout: float | None = None, sbatch: str | list[str] = (),
            stream: bool = False, qsub: str | list[str] = ()):
        """Run SCRIPTS (relative to DIRECTORY) on SYSTEM as `aitestbed run` does; returns
        its RunReport (`.state`, `.exit_code`, `.results`, `.to_json()`). An error of the
        tool itself (cluster not ready, no such script) raises AitestbedError."""
        import sys

        from aitestbed.host import jobrun

        if output_dir is None:
            output_dir = self.output_root / uuid.uuid4().hex[:8]

        def to_stderr(script: str, text: str) -> None:
            if stream:
                sys.stderr.write(text)

        options = jobrun.Options(system, list(scripts), user, Path(directory), Path(output_dir),
                                 timeout, [sbatch] if isinstance(sbatch, str) else list(sbatch),
                                 on_output=to_stderr,
                                 qsub=[qsub] if isinstance(qsub, str) else list(qsub))
        return jobrun.run(self.name, options)


def session_profile(wanted: list[str] | None) -> str:
    """The mini profile that has every wanted system: `mini`, else today's
    `alcf-2026-mini` (Metis, the GroqRack under OpenPBS)."""
    from aitestbed.host.inventory import load

    for profile in ("mini", "alcf-2026-mini"):
        if wanted and set(wanted) <= set(load(profile).systems):
            return profile
    return "mini"


@pytest.fixture(scope="session")
def testbed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    from aitestbed.host import lifecycle
    from aitestbed.host.errors import AitestbedError
    from aitestbed.host.inventory import parse_systems
    from aitestbed.host.state import practice_user_name

    config = request.config
    name = config.getoption("--aitestbed-cluster") or os.environ.get("AITESTBED_CLUSTER")
    output_root = tmp_path_factory.mktemp("aitestbed-run")
    if name:
        yield Testbed(name, output_root)
        return
    systems = (config.getoption("--aitestbed-systems") or os.environ.get("AITESTBED_SYSTEMS")
               or config.getini("aitestbed_systems") or None)
    name = f"pytest-{uuid.uuid4().hex[:6]}"
    try:
        wanted = parse_systems(systems)
        lifecycle.up(name, session_profile(wanted), wanted, practice_user_name(), wait=True,
                     timeout=900)
    except AitestbedError as err:
        lifecycle.destroy(name)
        pytest.fail(f"aitestbed: could not bring up a cluster for the session: {err}",
                    pytrace=False)
    try:
        yield Testbed(name, output_root)
    finally:
        lifecycle.destroy(name)
