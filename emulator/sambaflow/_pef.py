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
        text = file.read_text()
    except FileNotFoundError:
        raise PefError(f"PEF file {path} does not exist: compile the model first "
                       "(compile --pef-name=<name> --output-folder=<dir> writes "
                       "<dir>/<name>/<name>.pef)") from None
    except PermissionError:
        raise PefError(f"PEF file {path} cannot be read: permission denied") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PefError(f"PEF file {path} cannot be read: {err}") from None
    try:
        pef = json.loads(text)
    except json.JSONDecodeError:
        pef = None
    if not isinstance(pef, dict) or pef.get("format") != FORMAT:
        raise PefError(f"{path} is not a PEF file compiled by this SambaFlow "
                       f"(expected {FORMAT}): compile the model again")
    return pef
