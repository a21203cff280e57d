"""The tiles a loaded PEF runs on, asked of the node's snd daemon.

The daemon (aitestbed.sambanova.snd.server) owns the node's RDUs: it places a session on
tiles of the RDUs the caller's Slurm job holds, shows it in sntilestat (%pload while
the PEF loads, %exec while it runs), and frees the tiles when the session closes or
the process dies. A socket call happens only at those transitions, never per step.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from ._errors import RduUnavailableError


class TileSession:
    def __init__(self) -> None:
        self._client: Any = None
        self.id: str | None = None
        self.tiles: list[str] = []
        self.state: str | None = None
        self._registered = False

    def open(self, tiles: int) -> list[str]:
        try:
            from aitestbed.sambanova.snd.client import SndClient, SndError, SndUnavailable
        except ImportError:
            raise RduUnavailableError(
                "no RDU device found: this host has no SambaNova runtime (snd); run on an "
                "RDU node (sn30-r[1-4]-h[1-2], sm-01, sm-02) with srun or sbatch") from None
        try:
            client = SndClient()
            session = client.open_session(tiles=tiles, job_id=os.environ.get("SLURM_JOB_ID"))
        except SndUnavailable as err:
            raise RduUnavailableError(
                f"no RDU device found: {err or 'snd does not answer on this host'}; run on an "
                "RDU node (sn30-r[1-4]-h[1-2], sm-01, sm-02) with srun or sbatch") from None
        except SndError as err:
            raise RduUnavailableError(str(err)) from None
        except OSError as err:
            raise RduUnavailableError(f"no RDU device found: snd cannot be reached: {err}") \
                from None
        self._client = client
        self.id = str(session["id"])
        self.tiles = list(session.get("tiles", []))
        if not self._registered:
            self._registered = True
            atexit.register(self.close)
        return self.tiles

    def set_state(self, state: str) -> None:
        if self._client is None or self.id is None or state == self.state:
            return
        self.state = state
        try:
            self._client.set_state(self.id, state)
        except Exception:  # noqa: BLE001 - the display of tile state never stops a run
            pass

    def close(self) -> None:
        if self._client is None or self.id is None:
            return
        session_id, self.id = self.id, None
        try:
            self._client.close_session(session_id)
        except Exception:  # noqa: BLE001 - snd frees a dead process's tiles anyway
            pass
