"""SambaNova Metis (SN40L inference endpoints behind the ALCF Inference Service, the
alcf-2026 profiles): the registry's entry (host/systems/__init__.py says what one holds).

Its room is aitestbed.metis; its role metis_gateway; its inventory group metis_system
(one gateway node at the docs' names inference-api.alcf.anl.gov and metis.alcf.anl.gov).
It has no scheduler and no `aitestbed run` target: users call its HTTPS API.

Built on the host: the training corpus (the project's own docs/*.md, build/metis/corpus);
the model is trained from it inside the gateway's image build (the node image has
Debian's torch, the host's venv has not). Made per cluster at every `up` (prepare):
  common/metis/ca.crt          the cluster's Metis CA (its key: <state>/metis/ca.key,
                               never in a container), trusted by the nodes that carry Metis
  common/metis/munge.key       the key of the Metis MUNGE domain (login nodes and the
                               gateway: the token helper proves who runs it with it)
  nodes/<gateway>/metis/       gateway.crt/.key: TLS for the docs' names, localhost and
                               127.0.0.1 (the port published for the host)
and whenever the accounts are published (`up`, the account playbooks: publish):
  nodes/<gateway>/metis/oath/  <user>.oath for each active user: the passcode enrolments
                               the login nodes have (roles/sshd's oath-user.j2), which
                               the device-code login checks (aitestbed.metis.otp)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from aitestbed.host import sshdconf
from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import project_root
from aitestbed.host.sdk_artifacts import fresh_output, pinned_wheels
from aitestbed.host.systems import cerebras_pki
from aitestbed.host.systems.metis_access import GATEWAY_CLASS, metis_cmd
from aitestbed.host.systems.model import Artifact, System

if TYPE_CHECKING:
    from aitestbed.host.inventory import Topology
    from aitestbed.host.state import ClusterState

CA_NAME = "aitestbed-metis-ca"
# The docs' names come first: the certificate's subject is the first.
SERVICE_NAMES = ("inference-api.alcf.anl.gov", "metis.alcf.anl.gov", "inference.alcf.anl.gov")
MUNGE_KEY_BYTES = 1024


CLIENT_REQUIREMENTS = Path("images") / "metis-client-requirements.txt"


def build_metis(root: Path | None = None) -> Path:
    """build/metis/corpus: the Markdown pages of docs/ the gateway's model is trained on
    (in the image build: roles/metis_gateway); build/metis/wheels: the docs' `pip install
    openai globus_sdk` for the login nodes (hash-pinned, downloaded once)."""
    root = root or project_root()
    pages = sorted((root / "docs").glob("*.md"))
    if not pages:
        raise AitestbedError(f"no docs/*.md under {root}: the Metis model is trained on the "
                             "project's documentation")
    out = fresh_output(root, "metis")
    corpus = out / "corpus"
    corpus.mkdir()
    for page in pages:
        shutil.copy2(page, corpus / page.name)
    pinned_wheels(root, root / CLIENT_REQUIREMENTS, out / "wheels")
    return out


def gateways(topology: Topology) -> list:
    return [n for n in topology.nodes if n.node_class == GATEWAY_CLASS]


def _munge_key(path: Path) -> None:
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        out.write(os.urandom(MUNGE_KEY_BYTES))


def prepare(state: ClusterState, topology: Topology) -> None:
    """The CA, the gateway's certificate and the Metis MUNGE key (made once, then kept:
    `up` after `down` changes nothing)."""
    nodes = gateways(topology)
    if not nodes:
        return
    ca = cerebras_pki.ClusterCA(state.root / "metis", state.common_dir / "metis", CA_NAME)
    for node in nodes:
        ca.server(state.node_dir(node.name) / "metis",
                  [*SERVICE_NAMES, *(n for n in node.dns_names if n not in SERVICE_NAMES)],
                  stem="gateway")
    _munge_key(state.common_dir / "metis" / "munge.key")


def publish(state: ClusterState, topology: Topology, accounts: dict) -> None:
    """The gateway's copy of the active users' passcode enrolments (nodes/<gateway>/
    metis/oath/), exactly those: an offboarded user's goes. Rendered from the same
    template as the login nodes' (aitestbed.host.sshdconf); node_setup installs them."""
    nodes = gateways(topology)
    if not nodes:
        return
    registry = state.registry()
    active = [u["name"] for u in accounts["users"] if u["active"]]
    enrolments = sshdconf.oath_files({name: registry.token(name) for name in active})
    for node in nodes:
        directory = state.node_dir(node.name) / "metis" / "oath"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name, text in enrolments.items():
            state.write(directory / name, text)
            (directory / name).chmod(0o600)
        for path in directory.iterdir():
            if path.name not in enrolments:
                path.unlink()


SYSTEM = System(
    name="metis",
    title="SambaNova Metis (SN40L inference endpoints)",
    # login: the token helper, the Metis MUNGE domain and the CA on the login nodes of the
    # topology's other systems (a Metis-only topology has the gateway alone).
    node_classes=("login", GATEWAY_CLASS),
    scheduler="service",
    artifacts=(Artifact("the Metis training corpus (docs/*.md) and the openai and globus_sdk "
                        "wheels", lambda ctx: build_metis(ctx.root),
                        "the model itself is trained in the gateway's image (~1 min); 12 MB "
                        "of wheels, downloaded once into build/downloads",
                        inputs=(str(CLIENT_REQUIREMENTS),)),),
    prepare=prepare,
    commands=(metis_cmd,),
    pytest_plugin="aitestbed.host.systems.metis_pytest",
    publish=publish,
)
