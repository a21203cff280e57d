"""The one exception our code raises for bad input or an unusable environment.

The CLI prints its message as one line and exits non-zero; no traceback.
"""


class AitestbedError(Exception):
    """A failure the user can act on; the message says how."""
