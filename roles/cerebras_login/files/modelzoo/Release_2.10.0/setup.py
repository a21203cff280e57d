"""Install the emulated Cerebras Model Zoo (Release 2.10.0) and its `cszoo` command.

Install it as the release asks, editable (`pip install -e modelzoo`): the
appliance's workers import the models from this checkout (its src/ directory),
so an ordinary install would leave them nothing to import.
"""

from setuptools import find_namespace_packages, setup
from setuptools.command.install import install

VERSION = "2.10.0"


class EditableOnly(install):
    def run(self):
        raise RuntimeError(
            "The package `cerebras_modelzoo` is not a mountable package on the appliance "
            "since it is not available in PyPI. It must be installed as an editable "
            "package using:\n  $ pip install -e /path/to/cerebras/modelzoo\n")


setup(
    name="cerebras_modelzoo",
    version=VERSION,
    description="Cerebras Modelzoo (aitestbed emulator edition)",
    packages=find_namespace_packages(where="src/", include=["cerebras.modelzoo*"]),
    package_dir={"": "src"},
    package_data={"cerebras.modelzoo": ["**/*.yaml"]},
    python_requires=">=3.11",
    # The release's cerebras_pytorch; PyTorch, NumPy and PyYAML are the system's
    # (the cluster cannot download them; the cerebras_pytorch wheel shows them).
    install_requires=[f"cerebras_pytorch=={VERSION}"],
    entry_points={"console_scripts": ["cszoo = cerebras.modelzoo.cli.main:main"]},
    cmdclass={"install": EditableOnly},
)
