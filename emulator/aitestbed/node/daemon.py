"""What every node daemon shares: a JSON-over-HTTP request handler and an atomic save.

A daemon is state / wire / client (moto's models / responses split): its room holds
the model, a handler derived from `JsonHandler` routes requests to it, and the
server writes the model with `save_json` on every change, so a restart of the
daemon (or of its node) finds the state a crash cannot have half-written.
Standard library only: this runs on every node, inside the daemons' own Python.
"""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any


def save_json(path: Path, data: Any, *, sort_keys: bool = False) -> None:
    """Write `data` as indented JSON to `path`: a temporary file beside it, then a rename.

    The rename is atomic, so a reader (or the daemon after a crash) sees the old
    file or the new one, never a half-written one, and no temporary file is left.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")
    tmp.replace(path)


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads and answers JSON, on a TCP or a Unix socket.

    `read_json()` raises ValueError (json.JSONDecodeError) on a body that is not
    JSON; each daemon turns that into its own 400 reply.
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base's name
        pass  # one line per request would drown the service log

    def reply(self, status: int, body: dict | list | None = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_json(self) -> Any:
        """The request's JSON body; {} when it has none."""
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}
