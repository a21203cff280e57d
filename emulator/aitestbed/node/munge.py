"""MUNGE credentials: who sent a request over the network, as Slurm itself knows it.

Every node of a Slurm cluster runs munged with the cluster's key (roles/munge), and
Slurm proves its users' identity to slurmctld with it. A service reached over TCP
uses it the same way, as snd uses SO_PEERCRED on its Unix socket:

  encode()            `munge -n` as the calling process: a credential of its uid and gid
  decode(credential)  `unmunge` on the receiving node: the uid munged vouches for

munged refuses a credential it has already decoded (a replay) and one older than
its time to live (300 s), so a credential is made for each request. `socket` names
another domain's munged (the Metis domain, aitestbed.metis.identity).
"""

from __future__ import annotations

import re
import subprocess

# `munge -n` prints MUNGE:<base64>:; anything else is not given to unmunge.
_CREDENTIAL = re.compile(r"MUNGE:[A-Za-z0-9+/=]{16,4096}:")
_UID_LINE = re.compile(r"^UID:\s.*\((\d+)\)\s*$", re.MULTILINE)
TIMEOUT_S = 5.0


class MungeError(Exception):
    """No credential could be made, or the one given is not valid."""


def _run(argv: list[str], stdin: str = "") -> str:
    try:
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                                timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise MungeError(f"{argv[0]} is not installed here (Debian's munge package)") from None
    except OSError as err:
        raise MungeError(f"{argv[0]} could not be run: {err.strerror}") from None
    except subprocess.TimeoutExpired:
        raise MungeError(f"{argv[0]} did not answer within {TIMEOUT_S:.0f} s "
                         "(is munged running?)") from None
    if result.returncode:
        reason = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        raise MungeError(reason[0].removeprefix(f"{argv[0]}: ").removeprefix("Error: "))
    return result.stdout


def _socket(socket: str | None) -> list[str]:
    """The munged to ask: the node's own (None), or another domain's (its socket)."""
    return [f"--socket={socket}"] if socket else []


def encode(socket: str | None = None) -> str:
    """A fresh credential of this process's uid, with no payload."""
    return _run(["munge", "-n", *_socket(socket)]).strip()


def is_credential(text: str) -> bool:
    return _CREDENTIAL.fullmatch(text) is not None


def uid_of(metadata: str) -> int:
    """The uid in unmunge's metadata (`UID:   alice (10001)`)."""
    match = _UID_LINE.search(metadata)
    if match is None:
        raise MungeError("unmunge printed no UID")
    return int(match.group(1))


def decode(credential: str, socket: str | None = None) -> int:
    """The uid the credential was made by; MungeError if munged does not vouch for it."""
    if not is_credential(credential):
        raise MungeError("not a MUNGE credential")
    return uid_of(_run(["unmunge", "--keys=UID", *_socket(socket)], credential + "\n"))
