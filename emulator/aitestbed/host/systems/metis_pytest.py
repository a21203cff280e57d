"""Metis's pytest fixtures for a project's tests (loaded by the aitestbed pytest plugin
through the registry: System.pytest_plugin).

    def test_agent(metis, monkeypatch):
        for key, value in metis.environment.items():  # OPENAI_BASE_URL, OPENAI_API_KEY,
            monkeypatch.setenv(key, value)              # SSL_CERT_FILE, ...
        client = OpenAI()

`metis` (session scope) is the gateway of the session's cluster (`testbed`: a running
cluster of an alcf-2026 profile, or one the plugin brings up with --aitestbed-systems
metis,...) on 127.0.0.1 with a token of the practice user.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def metis(testbed):
    from aitestbed.host.errors import AitestbedError
    from aitestbed.host.state import ClusterState
    from aitestbed.host.systems import metis_access

    try:
        return metis_access.access(ClusterState(testbed.name))
    except AitestbedError as err:
        pytest.fail(f"aitestbed: no Metis gateway for the session: {err}", pytrace=False)
