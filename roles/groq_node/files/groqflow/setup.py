"""GroqFlow (aitestbed emulation): installs the `groqflow` package from ./groqflow/.

The image build copies the package into groqflow/ from the aitestbed source tree; the
dependencies come from the cluster's wheelhouse (the nodes cannot reach PyPI). torch is the
node's (Debian's python3-torch), not pinned here as the real setup.py pins torch==2.1.0.
"""

from setuptools import find_packages, setup

setup(
    name="groqflow",
    version="4.3.1",
    description="GroqFlow: build and run models on GroqChip processors (aitestbed emulation)",
    packages=find_packages(include=["groqflow", "groqflow.*"]),
    python_requires=">=3.8",
    install_requires=["onnx==1.14.0", "onnxruntime==1.15.1", "protobuf==3.20.3", "numpy",
                      "pyyaml"],
)
