import pytest


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch):
    """Every unit test gets its own state directory and no engine."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("AITESTBED_USER", raising=False)
    monkeypatch.delenv("AITESTBED_CLUSTER", raising=False)
    return tmp_path / "state"
