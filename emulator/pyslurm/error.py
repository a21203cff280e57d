"""pyslurm's error classes."""


class PyslurmError(Exception):
    pass


class RPCError(PyslurmError):
    """A request Slurm refused; msg is Slurm's own message."""

    def __init__(self, errno: int = 1, msg: str | None = None):
        self.errno = errno
        self.msg = msg or "Unspecified error"
        super().__init__(self.msg)


class ArgumentError(PyslurmError, ValueError):
    pass
