"""GroqRack (the alcf-2026 profile): the registry's entry (host/systems/__init__.py says
what one holds).

Its room is aitestbed.groq; its roles openpbs and groq_node; its inventory group
groq_system. Its scheduler is OpenPBS, built from source against the node OS (the only
system whose artifacts need the OS layer), and the PBS complex below is what its hosts
read at start (groq/pbs_setup.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from aitestbed.groq import guide
from aitestbed.groq.pbs_complex import Complex
from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import build_root, project_root
from aitestbed.host.sdk_artifacts import fresh_output, role_defaults
from aitestbed.host.systems.model import Artifact, RunTarget, System
from aitestbed.host.wheels import build_wheel

if TYPE_CHECKING:
    from aitestbed.host.inventory import Topology
    from aitestbed.host.state import ClusterState


def build_groq(root: Path | None = None) -> Path:
    """build/groq: the GroqFlow wheels (groqflow 4.3.1 from emulator/groqflow, the proof
    points' groqflow_demo_helpers) and the groqflow repository's tree that users clone
    (roles/groq_node/files/groqflow with the package in groqflow/, as upstream has it)."""
    root = root or project_root()
    out = fresh_output(root, "groq")
    source = root / "roles" / "groq_node" / "files" / "groqflow"
    version = role_defaults(root, "groq_node")["groq_node_groqflow_version"]
    build_wheel(out / "wheels", f"groqflow-{version}-py3-none-any.whl",
                {"groqflow": root / "emulator" / "groqflow"},
                summary=f"GroqFlow {version} for the emulated GroqRack (aitestbed)",
                requires=["onnx==1.14.0", "onnxruntime==1.15.1", "protobuf==3.20.3", "numpy",
                          "pyyaml"])
    build_wheel(out / "wheels", "groqflow_demo_helpers-0.2.0-py3-none-any.whl",
                {"demo_helpers": source / "demo_helpers" / "demo_helpers"},
                summary="The GroqFlow proof points' helpers (aitestbed)", requires=["tqdm"])
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    tree = out / "groqflow"
    shutil.copytree(source, tree, ignore=ignore)
    shutil.copytree(root / "emulator" / "groqflow", tree / "groqflow", ignore=ignore)
    return out


def build_openpbs(node_os: str, root: Path | None = None) -> Path:
    """build/openpbs: /opt/pbs of the GroqRack's scheduler, built from OpenPBS's source
    once per commit in a container of the node OS and cached (scripts/build-openpbs.sh).
    The source is downloaded and its sha256 checked, or read from the local copy
    AITESTBED_OPENPBS_TARBALL names where nothing can be downloaded."""
    root = root or project_root()
    out = fresh_output(root, "openpbs")
    defaults = role_defaults(root, "openpbs")
    commit = defaults["openpbs_commit"]
    url = defaults["openpbs_source_url"].replace("{{ openpbs_commit }}", commit)
    script = root / "scripts" / "build-openpbs.sh"
    env = {**os.environ, "AITESTBED_BUILD_DIR": str(build_root())}  # its downloads/
    if subprocess.run(["bash", str(script), commit, defaults["openpbs_sha256"], url, node_os,
                       str(out)], env=env, check=False).returncode:
        raise AitestbedError(f"could not build OpenPBS {commit[:7]} (see above)")
    return out



def pbs_complex(topology: Topology) -> Complex | None:
    """The PBS complex of the topology's GroqRack: its server, execution hosts (the
    GroqNodes) and clients (the rack's login nodes); None without a server."""
    servers = [n for n in topology.nodes if n.node_class == "pbs_server"]
    if not servers:
        return None
    system = servers[0].system
    return Complex(server=servers[0].name,
                   moms=[n.name for n in topology.nodes if n.node_class == "groq_node"],
                   clients=[n.name for n in topology.nodes
                            if n.system == system and n.node_class == "login"])


def prepare(state: ClusterState, topology: Topology) -> None:
    """pbs/pbs.json: the complex the nodes' PBS set-up reads at start."""
    record = pbs_complex(topology)
    if record is not None:
        state.write(state.common_dir / "pbs" / "pbs.json", record.to_json())


def _groq_nodes(nodes):
    """qsub is taken from the GroqNodes only (workq's acl_hosts; on the login node qsub
    answers "Access from host not allowed")."""
    return [n for n in nodes if n.node_class == "groq_node"]


SYSTEM = System(
    name="groq",
    title="GroqRack",
    node_classes=("login", "pbs_server", "groq_node"),
    scheduler="pbs",
    artifacts=(
        Artifact("OpenPBS", lambda ctx: build_openpbs(ctx.node_os(), ctx.root),
                 "compiled from source once per commit in a container of the node OS"),
        Artifact("the GroqFlow wheels and repository", lambda ctx: build_groq(ctx.root)),
    ),
    run_targets=(RunTarget("groq", "groq", "pbs", "GroqRack (qsub on a GroqNode)",
                           _groq_nodes),),
    prepare=prepare,
    guide=guide,
)
