"""PEF files: what `compile` produces and `run`/`test` load.

A real PEF is the RDU's executable. Ours is a JSON document holding what running it
needs and checks: the batch size and tiles it was compiled for, the data-parallel
world size, whether it has backward and optimizer sections (not --inference), the
model's parameter count, input and output shapes, the graph digest (so a PEF of
another model is refused) and the timing model's workload and figures.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ._errors import PefError

FORMAT = "aitestbed-pef/1"
MAGIC = "SambaNova PEF (aitestbed emulation)"


def write(path: Path, pef: dict[str, Any]) -> None:
    document = {"magic": MAGIC, "format": FORMAT, **pef}
    text = json.dumps(document, indent=1, sort_keys=False, default=str) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read(path: str | os.PathLike[str] | None) -> dict[str, Any]:
    if path is None or str(path) == "":
        raise PefError("no PEF given: pass the PEF that compile created, "
                       "e.g. --pef=out/<name>/<name>.pef (-p)")
    file = Path(path)
    if file.is_dir():
        raise PefError(f"PEF file {path} is a directory: pass the .pef file inside it")
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise PefError(f"PEF file {path} does not exist: compile the model first "
                       "(compile --pef-name=<name> --output-folder=<dir> writes "
                       "<dir>/<name>/<name>.pef)") from None
    except PermissionError:
        raise PefError(f"PEF file {path} cannot be read: permission denied") from None
    except OSError as err:
        raise PefError(f"PEF file {path} cannot be read: {err}") from None
    try:
        pef = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        pef = None
    if not isinstance(pef, dict):  # random bytes, or a text file (C58)
        raise PefError(f"PEF file {path} is not a PEF: compile one with `python {_app()} "
                       "compile --pef-name=<name> --output-folder=<dir>` (it writes "
                       "<dir>/<name>/<name>.pef)")
    if pef.get("format") != FORMAT:
        raise PefError(f"{path} is not a PEF file compiled by this SambaFlow "
                       f"(expected {FORMAT}): compile the model again")
    return pef


def _app() -> str:
    """The app the user ran (`lenet.py`), for the compile command to suggest."""
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return name if name.endswith(".py") else "<app>.py"
