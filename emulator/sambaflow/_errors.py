"""What the SambaFlow stack reports: a message, then the process exits with status 1."""

from __future__ import annotations


class SambaError(Exception):
    """A failure the runtime reports to the user (no traceback, exit status 1)."""


class PefError(SambaError):
    """The PEF is missing, unreadable, or not this model's."""


class RduUnavailableError(SambaError):
    """No RDU can run the PEF: no snd on this host, or the job's RDUs cannot hold it."""


class SambaAssertionError(SambaError, AssertionError):
    """`test`: the RDU's results differ from the CPU's by more than the threshold."""
