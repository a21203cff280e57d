from setuptools import setup

setup(
    name="groqflow_demo_helpers",
    version="0.2.0",
    description="Helpers of the GroqFlow proof points (aitestbed emulation, offline)",
    packages=["demo_helpers"],
    # The real package pins transformers/datasets/torchvision; the emulated proof points
    # build their models in plain torch and their data sets here, offline.
    install_requires=["tqdm"],
)
