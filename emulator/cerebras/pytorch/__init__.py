"""cerebras.pytorch: Release 2.10's name of the emulated cerebras_pytorch (the same modules)."""

import sys

from cerebras_pytorch._alias import install

install()
import cerebras_pytorch as _package  # noqa: E402

sys.modules[__name__] = _package
