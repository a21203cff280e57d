"""The SambaNova workflows of the guide (seed 002, SN30 and SN10), replayed as a user.

A user logs in to the `sambanova` login node, hops to sn30-r1-h1 (a login
shell: SambaFlow is set up at login on SN30) or to sm-01 (SN10: `source
/software/sambanova/envs/sn_env.sh`), copies the starters and runs the
compile -> run -> test steps under Slurm; the system tools show the RDUs.
"""

from __future__ import annotations

import re
import time

import pytest
from aitestbed.node import guide
from aitestbed.sambanova import guide as sn_guide

pytestmark = [pytest.mark.cluster, pytest.mark.presubmit]

LOGIN = "sambanova"
SN30 = "sn30-r1-h1"
SN10 = "sm-01"
STARTERS = sn_guide.STARTERS
LENET_VENV = sn_guide.LENET_VENV
COMPILE_LENET = f"test -e {sn_guide.PEF} || {sn_guide.LENET_COMPILE} >/dev/null"


def on_node(cluster, node: str, script: str, timeout: float = 900) -> tuple[int, str]:
    """Run `script` in a login shell on `node`, reached from the login node as in the guide."""
    return cluster.hop(LOGIN, node, script, timeout=timeout)


@pytest.fixture(scope="module")
def starters(cluster):
    """`cp -r /opt/sambaflow/apps/starters apps/starters`, as the guide says."""
    rc, out = on_node(cluster, SN30, guide.script("set -e", "rm -rf ~/apps", sn_guide.SN_STARTERS))
    assert rc == 0, out


def test_snd_runs_on_each_node_as_systemctl_shows(cluster):
    """Each as the guide prints it: SN30 a newer systemd's (●, └─, a Drop-In), SN10 an
    older one's (*, `-, labels three columns narrower); both end with a journal warning."""
    for node, bullet, width, branch in ((SN30, "●", 12, "└─"), (SN10, "*", 10, "`-")):
        rc, out = on_node(cluster, node, "systemctl status snd")
        assert rc == 0, out
        lines = out.splitlines()
        assert lines[0] == f"{bullet} snd.service - SN Devices Service", out
        active = "Active:".rjust(width)
        assert re.search(rf"^{active} active \(running\) since .* ago$", out, re.M), out
        pid = re.search(rf"^{'Main PID:'.rjust(width)} (\d+) \(snd\)$", out, re.M)
        assert pid, out
        assert " " * (width + 1) + f"{branch}{pid.group(1)} /opt/sambaflow/bin/snd" in lines, out
        assert lines[-1].startswith("Warning: "), out


def test_sntilestat_lists_every_tile_idle(cluster):
    rc, out = on_node(cluster, SN10, "sntilestat")
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[0] == ("TILE                 %idle %exec %pload %aload %chkpt %quiesce    PID"
                        "     USER COMMAND")
    assert len(lines) == 33  # SN10: 8 RDUs of 4 tiles
    assert lines[1] == "/XRDU_0/RDU_0/TILE_0 100.0   0.0    0.0    0.0    0.0      0.0"


def test_snconfig_shows_the_platforms(cluster):
    rc, out = on_node(cluster, SN30, "snconfig show Node static; "
                                     "snconfig show Node dynamic | grep -c perfect")
    assert rc == 0, out
    assert "Platform Name: DataScale SN30-8" in out
    assert "        Total XRDU_3 memory size (GB): 2048.0" in out
    assert out.splitlines()[-1] == "64"
    rc, out = on_node(cluster, SN10, "snconfig")
    assert rc == 0, out
    assert "Platform Name: DataScale SN10-8" in out and "Number of TILES: 4" in out


def test_sn30_sets_sambaflow_up_at_login_and_a_venv_inherits_it(cluster):
    rc, out = on_node(cluster, SN30, """set -e
echo VIRTUAL_ENV=$VIRTUAL_ENV
python -c 'import sambaflow; print(sambaflow.__version__)'
cd ~ && rm -rf my_env
python -m venv --system-site-packages my_env
source my_env/bin/activate
python -c 'import sambaflow, torch; print("venv", sambaflow.__version__)'""")
    assert rc == 0, out
    assert "VIRTUAL_ENV=/opt/sambaflow/venv" in out
    assert "1.11.5" in out.splitlines() and "venv 1.11.5" in out


def test_sn10_environment_script(cluster):
    rc, out = on_node(cluster, SN10, """echo before=$(command -v python || echo none)
source /software/sambanova/envs/sn_env.sh
echo after=$(command -v python) threads=$OMP_NUM_THREADS
alias snpath snthreads snvenv
python -c 'import sambaflow; print(sambaflow.__version__)'""")
    assert rc == 0, out
    assert "before=/usr/bin/python" in out  # Debian's python-is-python3, as ALCF's nodes
    assert "after=/opt/sambaflow/venv/bin/python threads=16" in out
    assert "alias snvenv='source /opt/sambaflow/venv/bin/activate'" in out


def test_lenet_compile_test_and_run_with_srun(cluster, starters):
    rc, out = on_node(cluster, SN30, guide.script(
        "set -e", LENET_VENV, f"cd {sn_guide.LENET}", sn_guide.LENET_COMPILE, "ls pef/lenet",
        sn_guide.LENET_TEST, f"{sn_guide.LENET_RUN} > run.log 2>&1", "tail -n 4 run.log"))
    assert rc == 0, out
    assert "Test passed: the RDU's results match the CPU's" in out, out
    for name in ("lenet.pef", "lenet.samba.log", "lenet.mac.log", "lenet.plasma_compile.log"):
        assert name in out.split(), out
    assert re.search(r"Placing log files in .*pef/lenet/lenet\.samba\.log", out), out
    assert "PEF file" in out and "lenet.pef created" in out
    assert "Epoch [1/1], Step [60000/60000], Loss: " in out, out
    accuracy = re.search(r"Test Accuracy: ([\d.]+)", out)
    assert accuracy and float(accuracy.group(1)) >= 90, out
    assert re.search(r"sn_create_session: PEF File: pef/lenet/lenet\.pef", out), out


def test_lenet_with_sbatch_and_output_log(cluster, starters):
    """The guide's batch script; its run line stops the epoch early (the srun test above
    trains the whole epoch: this one is about sbatch and the output file)."""
    rc, out = on_node(cluster, SN30, f"""set -e
{LENET_VENV}
cd {STARTERS}/lenet
{sn_guide.lenet_job_script("--max-steps 2000")}
mkdir -p pef/lenet
sbatch --wait --output=pef/lenet/output.log submit-lenet-job.sh
cat pef/lenet/output.log""")
    assert rc == 0, out
    assert "Using patched version of torch.cat and torch.stack" in out
    assert "Test Accuracy: " in out
    assert re.search(r"Log ID initialized to: \[\w+\]\[python\]\[\d+\] at "
                     r"/var/log/sambaflow/runtime/sn\.log", out), out


@pytest.mark.slow("the guide's full logreg epoch (60,000 steps) and its accuracy")
def test_logreg_compile_test_run_reaches_the_guides_accuracy(cluster, starters):
    rc, out = on_node(cluster, SN30, f"""set -e
source /opt/sambaflow/apps/starters/logreg/venv/bin/activate
cd {STARTERS}/logreg
srun python logreg.py compile --pef-name="logreg" --output-folder="pef"
srun python logreg.py test --pef="pef/logreg/logreg.pef"
srun python logreg.py run --pef="pef/logreg/logreg.pef" """)
    assert rc == 0, out
    steps = re.findall(r"Epoch \[1/1\], Step \[(\d+)/60000\], Loss: ([\d.]+)", out)
    assert [s for s, _ in steps][-6:] == ["10000", "20000", "30000", "40000", "50000", "60000"]
    assert float(steps[-1][1]) < float(steps[0][1]), steps
    accuracy = re.search(r"Test Accuracy: ([\d.]+)", out)
    assert accuracy and float(accuracy.group(1)) >= 88, out


@pytest.mark.slow("a second starter model of the compile/run workflow (LeNet is presubmit)")
def test_ffn_mnist_with_the_default_output_folder(cluster, starters):
    rc, out = on_node(cluster, SN30, f"""set -e
source /opt/sambaflow/apps/starters/ffn_mnist/venv/bin/activate
cd {STARTERS}/ffn_mnist/
srun python ffn_mnist.py  compile -b 1 --pef-name="ffn_mnist" --mac-v2
srun python ffn_mnist.py  run -b 1 -p out/ffn_mnist/ffn_mnist.pef""")
    assert rc == 0, out
    assert "Test Accuracy" in out


def test_bad_input_fails_clearly(cluster, starters):
    rc, out = on_node(cluster, SN30, f"""{LENET_VENV}
cd {STARTERS}/lenet
{COMPILE_LENET}
srun python lenet.py run -b 4 --pef=pef/lenet/lenet.pef; echo "batch rc=$?"
srun python lenet.py run -ws 8 --pef=pef/lenet/lenet.pef; echo "ws rc=$?"
srun python lenet.py run --pef=pef/nope/nope.pef; echo "missing rc=$?"
srun python lenet.py train; echo "subcommand rc=$?"
python lenet.py run --pef=pef/lenet/lenet.pef; echo "no slurm rc=$?"
srun python lenet.py compile -b=1 --n-chips 2 --pef-name=lenet2 --output-folder=pef >/dev/null
srun python lenet.py run --pef=pef/lenet2/lenet2.pef --max-steps 10; echo "one rdu rc=$?"
srun --gres=rdu:2 python lenet.py run --pef=pef/lenet2/lenet2.pef --max-steps 10 >/dev/null
echo "two rdus rc=$?"
""")
    assert "batch size 1" in out and re.search(r"batch rc=[1-9]", out), out
    assert "error: unrecognized arguments: -ws 8" in out and re.search(r"ws rc=[1-9]", out), out
    assert "pef/nope/nope.pef" in out and re.search(r"missing rc=[1-9]", out), out
    assert "invalid choice: 'train'" in out and re.search(r"subcommand rc=[1-9]", out), out
    assert re.search(r"no slurm rc=[1-9]", out) and "srun" in out, out
    # a PEF for two RDUs (16 tiles) needs --gres=rdu:2; plain srun gives one
    assert "--gres=rdu:2" in out and re.search(r"one rdu rc=[1-9]", out), out
    assert "two rdus rc=0" in out, out


def test_sntilestat_shows_a_running_jobs_tiles(cluster, starters):
    rc, out = on_node(cluster, SN30, f"""set -e
{LENET_VENV}
cd {STARTERS}/lenet
{COMPILE_LENET}
sbatch --parsable -o watch.log --wrap "python lenet.py run --pef=pef/lenet/lenet.pef" > job.id
for i in $(seq 120); do
    sntilestat --skip-idle | grep -q lenet && break
    sleep 0.5
done
sntilestat --skip-idle
scancel $(cat job.id)""")
    assert rc == 0, out
    busy = [ln for ln in out.splitlines() if ln.startswith("/XRDU_")]
    assert busy, out
    assert all(re.search(rf"\d+ +{cluster.user} python lenet\.py run", ln) for ln in busy), out


@pytest.mark.slow("the guide's eight UNet2d instances and their calibrated rates (scale)")
def test_unet2d_eight_data_parallel_instances(cluster):
    rc, out = on_node(cluster, SN30, """set -e
mkdir -p ~/apps/image/unet && cd ~/apps/image/unet
cp /data/ANL/scripts/Unet2d.sh /data/ANL/scripts/unet_batch.sh .
chmod +x Unet2d.sh unet_batch.sh
./Unet2d.sh pcompile 256 256 8 unet2d_8inst_pcompile
./Unet2d.sh prun 256 256 8 unet2d_8inst_prun
""", timeout=900)
    assert rc == 0, out
    result = f"/data/ANL/results/{SN30}/{cluster.user}/unet2d_8inst_prun/Unet2d.out"
    deadline = time.monotonic() + 600
    while True:  # prun submits the batch job and returns, as in the guide
        rc, log = on_node(cluster, SN30, f"cat {result} 2>/dev/null; squeue -h -u $USER | wc -l")
        if log.splitlines() and log.splitlines()[-1].strip() == "0" or time.monotonic() > deadline:
            break
        time.sleep(3)
    rates = [float(r) for r in re.findall(r"inner train loop time : [\d.]+ for 10 epochs, "
                                          r"number of global steps: \d+, "
                                          r"e2e samples_per_sec: ([\d.]+)", log)]
    assert len(rates) == 8, log
    assert all(500 <= r <= 900 for r in rates), rates


@pytest.mark.slow("the guide's GPT 1.5B script and its calibrated train time (200-300 s)")
def test_gpt15_single_instance_script(cluster):
    rc, out = on_node(cluster, SN30, """set -e
mkdir -p ~/apps/nlp/Gpt1.5B_single && cd ~/apps/nlp/Gpt1.5B_single
cp /data/ANL/scripts/Gpt1.5B_single.sh ~/apps/nlp/Gpt1.5B_single/
chmod +x Gpt1.5B_single.sh
./Gpt1.5B_single.sh gpt_single_test
grep -h "e2e_train_time" /data/ANL/results/$(hostname)/$USER/gpt_single_test/GPT1.5B.out""")
    assert rc == 0, out
    assert f"Using /data/ANL/results/{SN30}/{cluster.user}/gpt_single_test/GPT1.5B.out" in out
    summary = re.search(r"\{'e2e_train_time': ([\d.]+), 'training_sequences_per_second': "
                        r"([\d.]+), 'final_loss': ([\d.]+)\}", out)
    assert summary, out
    assert 200 < float(summary.group(1)) < 300  # ~2.4 device-seconds a step, 100 steps
    assert float(summary.group(3)) < 6.0  # the tiny GPT learned (it starts near ln 512)


@pytest.mark.slow("a second model: SN10 UNet compile, test and run as three batch jobs")
def test_sn10_unet_compile_test_run_with_sbatch(cluster):
    rc, out = on_node(cluster, SN10, """set -e
source /software/sambanova/envs/sn_env.sh
rm -rf ~/apps/image && mkdir -p ~/apps
cp -r /opt/sambaflow/apps/image ~/apps/image
cd ~/apps/image/unet
cp /software/sambanova/apps/image/pytorch/unet/unet_compile_run_inf_rl.sh .
export OUTDIR=~/apps/image/unet
export DATADIR=/software/sambanova/dataset/kaggle_3m
for step in compile test run; do
    sbatch --wait unet_compile_run_inf_rl.sh $step 32 1 >/dev/null
done
cat slurm-*.out""")
    assert rc == 0, out
    assert "[info] Compilation succeeded." in out
    assert re.search(r"\[INFO\]\[SC\]\[\d+\]: SambaConnector: PEF File: ", out), out
