"""A printable sheet per learner: the user name, the token's QR code, how to log in to
each system from a laptop, and the first exercise.

The login endpoints come from the cluster's generated ssh config (host/sshconfig.py),
so the names and ports are the ones sshd listens on; the address is where the room
reaches them (`classroom create --listen`, else 127.0.0.1). The sheets hold the
learners' token secrets: they are written private (0600 in a 0700 directory).
PDF: one file for the whole room, printed by Debian's Chromium when it is installed.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from aitestbed.classroom import otp, roster
from aitestbed.classroom.roster import Room
from aitestbed.exercises import catalog
from aitestbed.host.inventory import Topology
from aitestbed.host.state import ClusterState

PDF_TIMEOUT = 300


@dataclass(frozen=True)
class Endpoint:
    system: str
    node: str  # the login node
    names: tuple[str, ...]  # what ssh accepts for it (node, FQDN)
    port: int
    fingerprint: str  # its host key's SHA256 fingerprint, as ssh shows it


def parse_ssh_config(text: str) -> dict[str, tuple[tuple[str, ...], int]]:
    """Host entries with a HostName and a Port: first name -> (names, port)."""
    found: dict[str, tuple[tuple[str, ...], int]] = {}
    names: tuple[str, ...] = ()
    port = None
    for line in [*text.splitlines(), "Host"]:
        words = line.split()
        if not words:
            continue
        key = words[0].lower()
        if key in ("host", "match"):
            if names and port is not None and "*" not in names[0]:
                found[names[0]] = (names, port)
            names, port = (tuple(words[1:]) if key == "host" else ()), None
        elif key == "port" and names:
            port = int(words[1])
    return found


def fingerprint(public_key: str) -> str:
    blob = base64.b64decode(public_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def endpoints(state: ClusterState, topology: Topology, systems: list[str]) -> list[Endpoint]:
    entries = parse_ssh_config(state.ssh_config_path.read_text())
    found = []
    for node in topology.nodes:
        if node.node_class != "login" or node.system not in systems:
            continue
        if node.name not in entries:
            continue
        names, port = entries[node.name]
        key = state.node_dir(node.name) / "ssh_host_ed25519_key.pub"
        found.append(Endpoint(node.system, node.name, names, port,
                              fingerprint(key.read_text()) if key.is_file() else ""))
    return found


def _environment() -> Environment:
    return Environment(loader=PackageLoader("aitestbed.classroom", "templates"),
                       autoescape=select_autoescape(["html"]))


def first_exercise(topology: Topology) -> catalog.Exercise:
    return catalog.available(topology.systems)[0]


def render(state: ClusterState, topology: Topology, room: Room,
           learners: list[str] | None = None) -> dict[str, str]:
    """learner -> the HTML of their sheet; "index" -> all of them, a page each."""
    registry = state.registry()
    address = room.listen or "127.0.0.1"
    points = endpoints(state, topology, room.systems)
    exercise = first_exercise(topology)
    template = _environment().get_template("sheet.html")
    sheets = []
    for name in learners or list(room.learners):
        link = otp.uri(registry.token(name), name, state.name)
        sheets.append({
            "user": name, "uid": room.learners[name], "uri": link, "qr": otp.qr_svg(link),
            "issuer": otp.issuer(state.name),
        })
    common = {"cluster": state.name, "address": address, "endpoints": points,
              "exercise": exercise, "project": room.project,
              "listening": room.listen is not None}
    out = {s["user"]: template.render(sheets=[s], **common) for s in sheets}
    out["index"] = template.render(sheets=sheets, **common)
    return out


def sheets_dir(state: ClusterState) -> Path:
    return roster.room_dir(state.root) / "sheets"


def write(state: ClusterState, topology: Topology, room: Room, pdf: bool = True) -> dict:
    """Write every sheet (and the room's PDF when Chromium is here); what was written."""
    directory = sheets_dir(state)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, mode=0o700)
    for name, html in render(state, topology, room).items():
        path = directory / f"{name}.html"
        path.touch(mode=0o600)
        path.write_text(html)
    result = {"directory": str(directory), "html": len(room.learners), "pdf": None,
              "pdf_note": ""}
    if pdf:
        result["pdf"], result["pdf_note"] = print_pdf(directory / "index.html",
                                                      directory / "sheets.pdf")
    return result


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def print_pdf(html: Path, pdf: Path) -> tuple[str | None, str]:
    """(the PDF's path, or None and why not)."""
    browser = chromium()
    if browser is None:
        return None, ("no PDF: Debian's chromium is not installed (`apt-get install "
                      "chromium`, or open index.html in a browser and print it)")
    tmp = pdf.with_suffix(".tmp.pdf")
    tmp.touch(mode=0o600)
    try:
        result = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
             f"--print-to-pdf={tmp}", html.as_uri()],
            capture_output=True, text=True, timeout=PDF_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return None, f"no PDF: chromium did not finish in {PDF_TIMEOUT} s"
    if result.returncode or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        return None, f"no PDF: chromium failed: {result.stderr.strip()[-200:]}"
    tmp.replace(pdf)
    return str(pdf), ""
