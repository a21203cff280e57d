"""MUNGE credentials (aitestbed.node.munge), with stand-ins for munge and unmunge."""

import stat

import pytest
from aitestbed.node import munge

CREDENTIAL = "MUNGE:AwQFAAB8XkU1zRqUcVeO+Yq0/tU5AAAA=:"
METADATA = "UID:              bob (21002)\n\n"


@pytest.fixture
def tools(tmp_path, monkeypatch):
    """Put a `munge` and an `unmunge` script (printing `out`, exiting `status`) alone on
    PATH; they use only the shell's builtins."""
    monkeypatch.setenv("PATH", str(tmp_path))

    def install(name: str, out: str = "", err: str = "", status: int = 0) -> None:
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\nIFS= read -r line; printf '%s\\n' \"$line\" "
                          f"> {tmp_path}/{name}.stdin\nprintf '%s' '{out}'\n"
                          f"printf '%s\\n' '{err}' >&2\nexit {status}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)

    install.dir = tmp_path
    return install


def test_a_credential_names_the_uid_munged_vouches_for(tools):
    tools("munge", out=CREDENTIAL + "\n")
    tools("unmunge", out=METADATA)
    assert munge.encode() == CREDENTIAL
    assert munge.decode(CREDENTIAL) == 21002
    assert (tools.dir / "unmunge.stdin").read_text() == CREDENTIAL + "\n"


def test_munged_s_refusal_is_the_reason_given(tools):
    tools("unmunge", err="unmunge: Error: Replayed credential", status=15)
    with pytest.raises(munge.MungeError, match="^Replayed credential$"):
        munge.decode(CREDENTIAL)


@pytest.mark.parametrize("text", ["", "MUNGE::", "MUNGE:abc:", f"{CREDENTIAL}\nUID: 0",
                                  "--help", f"x{CREDENTIAL}"])
def test_what_is_not_a_credential_never_reaches_unmunge(tools, text):
    tools("unmunge", out="UID: root (0)\n")
    with pytest.raises(munge.MungeError, match="not a MUNGE credential"):
        munge.decode(text)
    assert not (tools.dir / "unmunge.stdin").exists()


def test_without_munge_installed_the_error_says_so(tools):
    with pytest.raises(munge.MungeError, match="munge is not installed here"):
        munge.encode()


def test_the_uid_is_read_from_unmunge_s_metadata():
    assert munge.uid_of("STATUS:  Success (0)\nUID:   ? (4242)\nGID:   x (7)\n") == 4242
    with pytest.raises(munge.MungeError, match="no UID"):
        munge.uid_of("STATUS:  Success (0)\n")


def test_a_tool_that_cannot_be_run_is_a_munge_error(tools):
    tools("munge")
    (tools.dir / "munge").chmod(0o644)
    with pytest.raises(munge.MungeError, match="munge could not be run: Permission denied"):
        munge.encode()
