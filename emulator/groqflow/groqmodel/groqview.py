"""GroqView, emulated: a small local web page summarising the compiled program."""

from __future__ import annotations

import html
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_PORT = 8439


def _free_port(preferred: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def render(view: dict) -> str:
    clock = view.get("clock_hz", 900e6)
    total = view["total_cycles"]
    rows = []
    for layer in view["layers"]:
        if layer["cycles"] == 0 and layer["kind"] == "free":
            continue
        share = 100.0 * layer["cycles"] / max(1, sum(x["cycles"] for x in view["layers"]))
        rows.append(f"<tr><td>{html.escape(layer['name'])}</td><td>{layer['op']}</td>"
                    f"<td>{layer['kind']}</td><td>{layer['cycles']}</td>"
                    f"<td>{layer['flops']}</td><td>{share:.1f}%</td></tr>")
    return (f"<!DOCTYPE html><html><head><title>GroqView - {html.escape(view['build_name'])}"
            "</title></head><body>"
            f"<h1>GroqView: {html.escape(view['build_name'])}</h1>"
            f"<p>{view['num_chips']} GroqChip processor(s); {total} cycles per chip "
            f"({total / clock * 1e3:.4f} ms at {clock / 1e6:.0f} MHz)</p>"
            "<table border=1><tr><th>layer</th><th>op</th><th>unit</th><th>cycles</th>"
            f"<th>FLOPs</th><th>share</th></tr>{''.join(rows)}</table></body></html>")


def serve(view_file: str, port: int | None = None, block: bool = True):
    with open(view_file, encoding="utf-8") as f:
        page = render(json.load(f)).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    port = _free_port(DEFAULT_PORT if port is None else port)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"Open your web browser:\n    http://localhost:{server.server_address[1]}",
          flush=True)
    if not block:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return None
