"""The Cerebras workflows users type: the 2023 guide's Release 2.1.1 on the CS-2 cluster
(seed 000: the PyTorch venv, the modelzoo, fc_mnist with `python run.py CSX`), and ALCF's
docs of today for the CS-3 cluster and Release 2.10 (the proxy, the venv with the
modelzoo installed, `cszoo fit` of GPT-3 111M and the example programs; reference:
alcf-testbed-2026.md §2.2-2.7). Data only; the machinery is node/guide.py.
"""

from __future__ import annotations

from typing import NamedTuple

from aitestbed.node.guide import UPGRADE_PIP, Typed, Workflow

# The CS-2 cluster: PyTorch venv and the modelzoo, Release 2.1.1 (seed 000) -----------------
CS_RELEASE = "R_2.1.1"
CS_DIR = f"~/{CS_RELEASE}"
CS_VENV = f"{CS_DIR}/venv_cerebras_pt"
CS_ACTIVATE = f"source {CS_VENV}/bin/activate"
CS_MODELZOO = f"{CS_DIR}/modelzoo"
CS_TAG = "Release_2.1.1"
FC_MNIST = f"{CS_MODELZOO}/modelzoo/fc_mnist/pytorch"
CS_DATASET = "/software/cerebras/dataset/fc_mnist/data/mnist/train"
CS_MAKE_VENV = "/software/cerebras/python3.8/bin/python3.8 -m venv venv_cerebras_pt"
CS_INSTALL = "pip install cerebras_pytorch==2.1.1"
CS_CLONE = "git clone https://github.com/Cerebras/modelzoo.git"
CS_CHECKOUT = f"git checkout {CS_TAG}"
CS_REQUIREMENTS = "pip install -r requirements.txt"

CS_HOME: Workflow = (
    ("chmod a+xr ~/",),  # the appliance reads the user's files: the home must be navigable
    (Typed(f"mkdir {CS_DIR}", f"mkdir -p {CS_DIR}"), f"chmod a+x {CS_DIR}/", f"cd {CS_DIR}"),
)
CS_VENV_SETUP: Workflow = (
    (CS_MAKE_VENV,),
    ("source venv_cerebras_pt/bin/activate",),
    (UPGRADE_PIP,),
    (CS_INSTALL,),
)
CS_MODELZOO_SETUP: Workflow = (
    (CS_CLONE,),
    ("cd modelzoo", "git tag", CS_CHECKOUT),
    (CS_REQUIREMENTS,),
)
CS_SETUP: Workflow = CS_HOME + CS_VENV_SETUP + CS_MODELZOO_SETUP
# The page says to point data_dir at the data set; in a script, with sed (run in FC_MNIST).
CS_SET_DATA_DIR = (f"sed -i 's|data_dir: \"./mnist\"|data_dir: \"{CS_DATASET}\"|' "
                   "configs/params.yaml")


def cs_run(label: str = "pt_smoketest") -> str:
    """The guide's fc_mnist training run on the CS-2, its job labelled name=<label>."""
    return (f"python run.py CSX --job_labels name={label} --params configs/params.yaml "
            "--num_csx=1 --mode train --model_dir $MODEL_DIR --mount_dirs /home/ /software "
            f"--python_paths /home/$(whoami)/{CS_RELEASE}/modelzoo --compile_dir /$(whoami)")


CS_ENTER: Workflow = ((CS_ACTIVATE,), (f"cd {FC_MNIST}",))
CS_FRESH_MODEL_DIR: Workflow = (
    ("export MODEL_DIR=model_dir",),
    ('if [ -d "$MODEL_DIR" ]; then rm -Rf $MODEL_DIR; fi',),
)
CS_SMOKETEST = f"{cs_run()} |& tee mytest.log"

# The CS-3 cluster, Release 2.10.0 (ALCF's docs, 2026) ----------------------------------------
# getting-started.md: `ssh ALCFUserID@cerebras.alcf.anl.gov`, then `ssh cer-usn-01` (or -02):
# jobs start from a user node.
CS3_HOST = "cerebras.alcf.anl.gov"
CS3_USER_NODES = ("cer-usn-01", "cer-usn-02")
CS3_RELEASE = "R_2.10.0"
CS3_DIR = f"~/{CS3_RELEASE}"
CS3_TAG = "Release_2.10.0"
CS3_VENV_NAME = "venv_cerebras_pt"
CS3_VENV = f"{CS3_DIR}/{CS3_VENV_NAME}"
CS3_ACTIVATE = f"source {CS3_VENV}/bin/activate"
CS3_MODELS = f"{CS3_DIR}/modelzoo/src/cerebras/modelzoo/models"
CS3_DATASET = "/software/cerebras/dataset"
# Every Cerebras page: a user node reaches outside through the proxy (wget wants the
# lower-case variable).
CS3_PROXY: Workflow = (
    ("export HTTPS_PROXY=http://proxy.alcf.anl.gov:3128",),
    ("export https_proxy=http://proxy.alcf.anl.gov:3128",),
)
CS3_MAKE_VENV = f"/usr/bin/python3.11 -m venv {CS3_VENV_NAME}"
CS3_INSTALL = "pip install -e modelzoo"

# customizing-environment.md, its two blocks as one (the second's `mkdir` dropped: the first
# made the folder). On a first install `deactivate` and `rm -r` complain, harmlessly.
CS3_MODELZOO_SETUP: Workflow = (
    (f"mkdir {CS3_DIR}",),
    (f"cd {CS3_DIR}",),
    *CS3_PROXY,
    (CS_CLONE,),
    ("cd modelzoo",),
    ("git tag",),
    (f"git checkout {CS3_TAG}",),
)
CS3_VENV_SETUP: Workflow = (
    (f"cd {CS3_DIR}",),
    ("deactivate",),
    (f"rm -r {CS3_VENV_NAME}",),
    (CS3_MAKE_VENV,),
    (f"source {CS3_VENV_NAME}/bin/activate",),
    (UPGRADE_PIP,),
    (CS3_INSTALL,),
)
CS3_SETUP: Workflow = CS3_MODELZOO_SETUP + CS3_VENV_SETUP
CS3_ENTER: Workflow = ((CS3_ACTIVATE,),)


class Cs3Model(NamedTuple):
    """A model of running-a-model-or-program.md and example-programs.md: its folder under
    CS3_MODELS, its YAML under CS3_DATASET, the job's label, its model_dir, and the YAML's
    path under configs/ (the source's file name unless the page gives another)."""

    directory: str
    source: str
    label: str
    model_dir: str
    config: str = ""

    @property
    def path(self) -> str:
        return f"{CS3_MODELS}/{self.directory}"

    @property
    def yaml(self) -> str:
        """The YAML's path in the model's folder."""
        return f"configs/{self.config or self.source.rsplit('/', 1)[-1]}"


# example-programs.md's table, in its order, and running-a-model-or-program.md's GPT-3.
BERT = Cs3Model("nlp/bert", "bert_large/bert_large_MSL128_sampleds.yaml", "bert_pt",
                "model_dir_bert_large_pytorch")
GPTJ = Cs3Model("nlp/gptj", "gptj/params_gptj_6B_sampleds.yaml", "gptj", "model_dir_gptj")
LLAMA2 = Cs3Model("nlp/llama", "params_llama2_7b.yaml", "llama2_7b", "model_dir_llama2_7b")
ESM2 = Cs3Model("nlp/esm2", "ESM-2/params_esm2_t12_35M_UR50D_modified.yaml", "esm2_t12_35m",
                "model_dir_esm2")
VIT = Cs3Model("vision/vision_transformer",
               "vision_transformer/params_vit_base_patch_16_imagenet_1k.yaml",
               "vision_transformer", "model_dir_vit")
DIT = Cs3Model("vision/dit", "params_dit_2B_patchsize_2x2_modified.yaml", "DiT", "model_dir_dit")
GPT3 = Cs3Model("nlp/gpt3", "OWT/Pytorch/111m_modified.yaml", "gpt3_111m",
                "model_dir_gpt3_111m", config="Cerebras_GPT/111m_modified.yaml")
CS3_EXAMPLES = (BERT, GPTJ, LLAMA2, ESM2, VIT, DIT)


def cszoo_fit(model: Cs3Model, model_dir: str = "$MODEL_DIR", label: str = "",
              checkpoint: str = "") -> str:
    """`cszoo fit` of the model's YAML (run in its folder), from `checkpoint` if given."""
    start = f" --checkpoint_path={checkpoint}" if checkpoint else ""
    return (f"cszoo fit{start} {model.yaml} --job_labels name={label or model.label} "
            f"--model_dir {model_dir}")


def cs3_run(model: Cs3Model) -> Workflow:
    """The pages' steps for a model, after the venv's activation: its folder, its YAML
    copied, a fresh MODEL_DIR, `cszoo fit` with the log in mytest.log."""
    return (
        (f"cd {model.path}",),
        (f"cp {CS3_DATASET}/{model.source} {model.yaml}",),
        (f"export MODEL_DIR={model.model_dir}",),
        ('if [ -d "$MODEL_DIR" ]; then rm -Rf $MODEL_DIR; fi',),
        (f"{cszoo_fit(model)} |& tee mytest.log",),
    )


# The sample output's command: the log's job ids, each with the line before it.
CS3_JOB_IDS = 'grep -B1 "Job id:" mytest.log'
# Restart from a checkpoint: "first raise max_steps to 800 in the YAML" (in a script, with
# sed; run in GPT3's folder), then `cszoo fit --checkpoint_path=...`.
CS3_MORE_STEPS = f"sed -i 's/max_steps: 400/max_steps: 800/' {GPT3.yaml}"
CS3_RESTART: Workflow = (
    (f"export MODEL_DIR={GPT3.model_dir}",),
    (f"{cszoo_fit(GPT3, checkpoint=f'{GPT3.model_dir}/checkpoint_400.mdl')} |& tee mytest.log",),
)
