"""The guide's Release 1.9.1 pages replayed as a user on cer-login-01.

"Customizing Environments", "Clone the Cerebras modelzoo", the fc_mnist sample
and the example programs (UNet, BERT, GPT-J on two CS-2), with the wheel name
for Python 3.11 (README) and without the two pip lines the cluster cannot
satisfy offline (numpy 1.23.4; datasets/transformers).
"""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

LOGIN = "cer-login-01"
VENV = "source ~/R_1.9.1/venv_pt/bin/activate"
WHEEL = "/opt/cerebras/wheels/cerebras_pytorch-1.9.1+1cf4d0632b-cp311-cp311-linux_x86_64.whl"
SETUP = f"""
chmod a+xr ~/
mkdir -p ~/R_1.9.1
chmod a+x ~/R_1.9.1/
cd ~/R_1.9.1
rm -rf venv_pt modelzoo
/software/cerebras/python3.8/bin/python3.8 -m venv venv_pt
source venv_pt/bin/activate
pip3 install {WHEEL} --find-links=/opt/cerebras/wheels
git clone https://github.com/Cerebras/modelzoo.git
cd modelzoo
git tag
git checkout Release_1.9.1
"""
COMMON = "--mount_dirs /home/ /software --python_paths /home/$(whoami)/R_1.9.1/modelzoo/"
R19_STEP = (r"\| Train Device=xla:0, Step=(\d+), Loss=([\d.]+), Rate=([\d.]+) samples/sec, "
            r"GlobalRate=([\d.]+) samples/sec")


@pytest.fixture(scope="module")
def release_1_9_1(cluster):
    rc, out = cluster.run(LOGIN, SETUP, timeout=300)
    assert rc == 0, out
    return out


def run_example(cluster, directory: str, commands: str) -> str:
    rc, out = cluster.run(LOGIN, f"{VENV} && cd ~/R_1.9.1/modelzoo/modelzoo/{directory} && "
                                 f"{commands} |& tee mytest.log; exit ${{PIPESTATUS[0]}}",
                          timeout=600)
    assert rc == 0, out
    return out


def steps(out: str) -> list[tuple[int, float, float, float]]:
    return [(int(s), float(loss), float(rate), float(glob))
            for s, loss, rate, glob in re.findall(R19_STEP, out)]


def test_the_release_tags_and_the_wheel(release_1_9_1):
    assert "Release_1.9.1" in release_1_9_1 and "Release_2.1.1" in release_1_9_1
    assert re.search(r"Successfully installed cerebras[-_]pytorch-1\.9\.1", release_1_9_1)


def test_the_guides_cp38_wheel_name_is_refused_on_python_3_11(cluster, release_1_9_1):
    cp38 = WHEEL.replace("cp311", "cp38").replace("/opt/cerebras/wheels", "/tmp")
    rc, out = cluster.run(LOGIN, f"{VENV} && cp {WHEEL} {cp38} && pip3 install {cp38}; "
                                 f"rc=$?; rm -f {cp38}; exit $rc")
    assert rc != 0 and "is not a supported wheel on this platform" in out


def test_fc_mnist_sample(cluster, release_1_9_1):
    """The guide's command; --max_steps 500 keeps it short (the guide's 10,000 take ~2 min)."""
    out = run_example(cluster, "fc_mnist/pytorch", (
        "sed -i 's|\"./data/mnist/[a-z]*\"|\"/software/cerebras/dataset/fc_mnist/data/mnist/"
        "train\"|' configs/params.yaml && export MODEL_DIR=model_dir && "
        "if [ -d \"$MODEL_DIR\" ]; then rm -Rf $MODEL_DIR; fi && "
        "python run.py CSX --job_labels name=pt_smoketest --params configs/params.yaml "
        "--num_csx=1 --mode train --model_dir $MODEL_DIR --mount_dirs /home/ /software "
        "--python_paths /home/$(whoami)/R_1.9.1/modelzoo --compile_dir /$(whoami) "
        "--max_steps 500"))
    assert [s for s, *_ in steps(out)] == list(range(50, 501, 50))
    for line in ["Saving checkpoint at global step 500", "Saving step 500 in dataloader "
                 "checkpoint", "Saved checkpoint at global step: 500", "Monitoring returned"]:
        assert line in out
    assert re.search(r"Training Complete\. Completed 64000 sample\(s\) in [\d.]+ seconds\.", out)


@pytest.mark.slow("a second model of the 1.9.1 run workflow (fc_mnist is presubmit)")
def test_unet_example(cluster, release_1_9_1):
    out = run_example(cluster, "vision/pytorch/unet", (
        "cp /software/cerebras/dataset/severstal-steel-defect-detection/"
        "params_severstal_binary_rawds.yaml configs/params_severstal_binary_rawds.yaml && "
        "export MODEL_DIR=model_dir_unet && if [ -d \"$MODEL_DIR\" ]; then rm -Rf $MODEL_DIR; fi "
        "&& python run.py CSX --job_labels name=unet_pt --params "
        "configs/params_severstal_binary_rawds.yaml --model_dir $MODEL_DIR --mode train "
        f"{COMMON} --compile_dir $(whoami)"))
    logged = steps(out)
    assert logged and logged[-1][1] < logged[0][1]  # the loss fell
    assert "Monitoring returned" in out


@pytest.mark.slow("a second model and its calibrated GlobalRate (the guide: 6493 samples/s)")
def test_bert_example(cluster, release_1_9_1):
    out = run_example(cluster, "transformers/pytorch/bert", (
        "cp /software/cerebras/dataset/bert_large/bert_large_MSL128_sampleds.yaml "
        "configs/bert_large_MSL128_sampleds.yaml && export MODEL_DIR=model_dir_bert_large_pytorch"
        " && if [ -d \"$MODEL_DIR\" ]; then rm -Rf $MODEL_DIR; fi && python run.py CSX "
        "--job_labels name=bert_pt --params configs/bert_large_MSL128_sampleds.yaml "
        f"--num_workers_per_csx=1 --mode train --model_dir $MODEL_DIR {COMMON} "
        "--compile_dir $(whoami)"))
    logged = steps(out)
    assert [s for s, *_ in logged] == list(range(100, 1001, 100))
    assert logged[-1][1] < logged[0][1]
    assert 6000 < logged[-1][3] < 7000  # the guide: GlobalRate=6493.27 at step 1000
    assert re.search(r"Training Complete\. Completed 1024000 sample\(s\) in [\d.]+ seconds\.", out)


@pytest.mark.slow("a second model, on both CS-2s, and its calibrated rate (33.98 samples/s)")
def test_gptj_example_on_two_systems(cluster, release_1_9_1):
    out = run_example(cluster, "transformers/pytorch/gptj", (
        "cp /software/cerebras/dataset/gptj/params_gptj_6B_sampleds.yaml "
        "configs/params_gptj_6B_sampleds.yaml && export MODEL_DIR=model_dir_gptj && "
        "if [ -d \"$MODEL_DIR\" ]; then rm -Rf $MODEL_DIR; fi && python run.py CSX "
        "--job_labels name=gptj_pt --params configs/params_gptj_6B_sampleds.yaml --num_csx=2 "
        f"--mode train --model_dir $MODEL_DIR {COMMON} --compile_dir $(whoami)"))
    logged = steps(out)
    assert [s for s, *_ in logged] == [100, 200, 300, 400, 500]
    assert logged[-1][1] < logged[0][1]
    assert 32 < logged[-1][3] < 36  # the guide: 33.98 samples/sec on two CS-2
    assert re.search(r"Training Complete\. Completed 65000 sample\(s\) in [\d.]+ seconds\.", out)
    rc, jobs = cluster.run(LOGIN, "csctl get jobs -a | grep name=gptj_pt")
    assert "cer-cs2-01,cer-cs2-02" in jobs
