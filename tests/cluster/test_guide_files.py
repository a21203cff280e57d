"""Files the guide points users to: the SambaNova documentation and Graphcore's
precompiled executables.

Expected cost on the mini cluster: about 1 min (the scp, a few seconds; the Graphcore
venv and examples set-up when another module has not left them, ~30 s; one MNIST epoch
under srun with both executables loaded from the cache, ~30 s).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from aitestbed.graphcore import guide as gc_guide
from aitestbed.host.systems.sambanova import write_sambanova_docs
from aitestbed.node import guide

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

ROOT = Path(__file__).resolve().parents[2]
GUIDE_PDFS = ["accuracy-debugging-tools.pdf", "compiler-options.pdf",
              "conversion-to-sambaflow.pdf", "getting-started.pdf", "intermediate-tutorial.pdf",
              "intro-tutorial-pytorch.pdf", "release-notes.pdf", "run-examples-language.pdf",
              "run-examples-pytorch.pdf", "run-examples-vision.pdf", "using-layernorm.pdf",
              "using-venvs.pdf"]
MODELS_COMPILE = "/software/graphcore/projects/models_compile"


def test_the_guides_scp_of_the_sambanova_docs(cluster, tmp_path):
    """`scp -r ALCFUserID@sambanova.alcf.anl.gov:/software/sambanova/docs/latest/* .`"""
    dest = tmp_path / "docs"
    dest.mkdir()
    argv = ["scp", "-F", str(cluster.ssh_config), "-o", "BatchMode=yes",
            "-o", f"User={cluster.user}", "-r",
            "sambanova:/software/sambanova/docs/latest/*", "."]
    result = subprocess.run(argv, cwd=dest, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.iterdir()) == GUIDE_PDFS
    # The image's copy is what a build from this checkout writes, byte for byte.
    built = write_sambanova_docs(ROOT, tmp_path / "built", "1.11.5")
    for path in built:
        assert (dest / path.name).read_bytes() == path.read_bytes(), path.name


def test_models_compile_copied_to_tmp_skips_the_mnist_compilation(cluster):
    """Seed 004: copy models_compile to ~/tmp, POPTORCH_CACHE_DIR=~/tmp, run MNIST."""
    venv = guide.script(gc_guide.GC_VENV_SETUP, quiet=True)
    examples = guide.script(gc_guide.GC_EXAMPLES_SETUP, quiet=True)
    rc, out = cluster.hop("gc-login-01", "gc-poplar-02", "\n".join([
        "set -e",
        f"if [ ! -x {gc_guide.GC_VENV}/bin/python ]; then\n{venv}\nfi",
        f"if [ ! -d {gc_guide.GC_EXAMPLES} ]; then\n{examples}\nfi",
        gc_guide.GC_ACTIVATE,
        "mkdir -p ~/tmp && rm -f ~/tmp/*.popef",
        f"cp {MODELS_COMPILE}/* ~/tmp",
        "ls ~/tmp | wc -l",
        gc_guide.GC_CACHE,
        f"cd {gc_guide.MNIST_DIR}",
        "/opt/slurm/bin/srun --ipus=1 python mnist_poptorch.py --epochs 1",
        "echo files: $(ls ~/tmp | wc -l)",
    ]), timeout=900)
    assert rc == 0, out
    text = "\n".join(line.split("\r")[-1] for line in out.splitlines())
    copied = int(re.search(r"^(\d+)$", text, re.M).group(1))
    assert copied == 6  # MNIST's two models and GPT-2's, for SDK 3.1.0 and 3.3.0
    bars = re.findall(r"Graph compilation: 100%\|██████████\| 100/100 \[(\d\d:\d\d)<00:00\]",
                      text)
    assert bars == ["00:00", "00:00"], text  # training and inference, both loaded
    assert f"files: {copied}" in text  # nothing compiled anew
    assert "Accuracy on test set:" in text
