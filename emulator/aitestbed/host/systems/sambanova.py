"""SambaNova DataScale SN30 and SN10: the registry's entry (host/systems/__init__.py says
what one holds).

Its room is aitestbed.sambanova; its role sambaflow; its inventory group sambanova_system
(two Slurm clusters: SN30, whose login node submits, and SN10, submitted to from an SN10
node, as the guide says).
"""

from __future__ import annotations

from pathlib import Path

from aitestbed.host.errors import AitestbedError
from aitestbed.host.paths import project_root
from aitestbed.host.sdk_artifacts import (
    copy_fashion_mnist_source,
    copy_mnist_source,
    fresh_output,
    role_defaults,
)
from aitestbed.host.systems.model import Artifact, RunTarget, System
from aitestbed.host.wheels import build_wheel
from aitestbed.sambanova import docs as sambanova_docs
from aitestbed.sambanova import guide


def build_sambanova(root: Path | None = None) -> Path:
    """build/sambanova: the SambaFlow wheel, the MNIST source for the starters' data, and
    the documentation PDFs (docs/latest)."""
    root = root or project_root()
    out = fresh_output(root, "sambanova")
    defaults = role_defaults(root, "sambaflow")
    version = defaults["sambaflow_version"]
    build_wheel(out, defaults["sambaflow_wheel"], {"sambaflow": root / "emulator" / "sambaflow"},
                summary=f"SambaFlow {version} for the emulated DataScale SN30/SN10 (aitestbed)",
                requires=["tqdm"])
    copy_mnist_source(root, out)
    copy_fashion_mnist_source(root, out)  # lenet's tutorial trains on it
    write_sambanova_docs(root, out / "docs" / "latest", version)
    return out


def write_sambanova_docs(root: Path, dest: Path, version: str) -> list[Path]:
    """/software/sambanova/docs/latest: the guide's twelve PDF names, each our own
    documentation of the emulated SambaFlow (aitestbed.sambanova.docs)."""
    try:
        pdfs = sambanova_docs.build_all(lambda path: (root / path).read_text(), version)
    except (OSError, sambanova_docs.DocsError) as err:
        raise AitestbedError(f"cannot write the SambaNova documentation: {err}") from None
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in pdfs.items():
        (dest / name).write_bytes(data)
        written.append(dest / name)
    return written


def _sn30_logins(nodes):
    logins = [n for n in nodes if n.node_class == "login"]
    return [n for n in logins if n.slurm_cluster] or logins


def _sn10_nodes(nodes):
    return [n for n in nodes if n.node_class == "rdu_node" and n.slurm_cluster == "sn10"]


SYSTEM = System(
    name="sambanova",
    title="SambaNova DataScale SN30 and SN10",
    node_classes=("rdu_node",),
    scheduler="slurm",
    artifacts=(Artifact("SambaFlow's wheel, the MNIST sources and the documentation PDFs",
                        lambda ctx: build_sambanova(ctx.root)),),
    run_targets=(
        RunTarget("sambanova", "sambanova", "slurm", "SambaNova SN30 (sbatch on its login node)",
                  _sn30_logins),
        RunTarget("sn10", "sambanova", "slurm", "SambaNova SN10 (sbatch on an SN10 node)",
                  _sn10_nodes),
    ),
    guide=guide,
)
