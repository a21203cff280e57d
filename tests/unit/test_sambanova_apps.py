"""The SambaNova example apps (UNet, GPT 1.5B), their scripts and their synthetic datasets."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pwd
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from aitestbed.datasets import gpt_corpus, kaggle_3m

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "roles" / "sambaflow" / "files"
IMAGE = FILES / "apps" / "image"
NLP = FILES / "apps" / "nlp" / "transformers_on_rdu"
SCRIPTS = FILES / "scripts"
XL_CONFIG = NLP / "customer_specific" / "mv" / "configs" / "gpt2_config_xl_50260.json"
HUMAN_DECISIONS = (NLP / "human_decisions_gm" / "mac_v2_overrides" /
                   "gpt2_48_enc_full_recompute_training_spatialmapping_tiling16_clmerge_gm_"
                   "nonpardp_lnsd.json")
COMPILER_CONFIGS = (NLP / "human_decisions_gm" / "compiler_configs" /
                    "compiler_configs_gpt2_sc_recompute_spatialmapping_tiling16_clsmerge_withcls_"
                    "nonpardp_norc_e2e.json")

for path in (str(IMAGE), str(NLP)):
    if path not in sys.path:
        sys.path.insert(0, path)

import gpt2_reduced  # noqa: E402
from unet_lib import data as unet_data  # noqa: E402
from unet_lib import model as unet_model  # noqa: E402


@pytest.fixture(scope="module")
def kaggle(tmp_path_factory) -> Path:
    return kaggle_3m.build(tmp_path_factory.mktemp("dataset") / "kaggle_3m")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return gpt_corpus.build(tmp_path_factory.mktemp("data") / "ss1024", shards=2,
                            sequences_per_shard=24, dev_sequences=4)


# --------------------------------------------------------------------------- kaggle_3m


def test_kaggle_3m_has_the_real_sets_patients_and_slices():
    layout = kaggle_3m.layout()
    assert layout == kaggle_3m.layout()  # deterministic
    assert len(layout) == 110 and sum(count for _, count in layout) == 3929
    assert all(20 <= count <= 88 for _, count in layout)
    assert len({name for name, _ in layout}) == 110
    assert all(re.fullmatch(r"TCGA_(CS|DU|EZ|FG|HT)_[0-9A-Z]{4}_(199\d|200\d)\d{4}", name)
               for name, _ in layout)


def test_kaggle_3m_build_layout_split_and_steps(kaggle):
    folders = sorted(p for p in kaggle.iterdir() if p.is_dir())
    assert len(folders) == 110
    images = [p for p in kaggle.rglob("*.tif") if not p.name.endswith("_mask.tif")]
    masks = list(kaggle.rglob("*_mask.tif"))
    assert len(images) == len(masks) == 3929
    first = folders[0]
    assert (first / f"{first.name}_1.tif").is_file()
    assert (first / f"{first.name}_1_mask.tif").is_file()
    assert "SYNTHETIC" in (kaggle / "README.md").read_text()
    rows = (kaggle / "data.csv").read_text().splitlines()[1:]
    tumour = sum(int(row.split(",")[2]) for row in rows)
    assert 0.25 < tumour / 3929 < 0.45  # the real set: 1,373 of 3,929
    size = sum(p.stat().st_size for p in kaggle.rglob("*") if p.is_file())
    assert size < 30_000_000
    # The apps' split: 85 % for training, 13 global steps of 256 alone, 1 of 8 x 256.
    pairs = unet_data.pairs(kaggle)
    assert len(pairs) == 3929
    train, val = unet_data.split(len(pairs))
    assert (len(train), len(val)) == (3339, 590)
    assert unet_data.steps_per_epoch(len(train), 256) == 13
    assert unet_data.steps_per_epoch(len(train), 256, world_size=8) == 1
    batches = [unet_data.epoch_batches(train, 256, 0, rank, 8) for rank in range(8)]
    seen = torch.cat([b for rank in batches for b in rank])
    assert len(seen) == 8 * 256 and len(seen.unique()) == 8 * 256


def test_kaggle_3m_files_are_tiffs_any_reader_takes(kaggle):
    from PIL import Image

    image, mask = unet_data.pairs(kaggle)[200]
    with Image.open(image) as opened:
        pixels = np.asarray(opened)
    with Image.open(mask) as opened:
        mask_pixels = np.asarray(opened)
    assert pixels.shape == (32, 32, 3) and mask_pixels.shape == (32, 32)
    assert set(np.unique(mask_pixels)) <= {0, 255}
    assert np.array_equal(kaggle_3m.read_tiff(image), pixels)
    assert np.array_equal(unet_data._read_plain_tiff(mask), mask_pixels)


def test_kaggle_3m_is_deterministic_and_the_cli_keeps_a_complete_build(kaggle, capsys):
    name, count = kaggle_3m.layout()[3]
    again = kaggle_3m.patient_slices(np.random.default_rng([kaggle_3m.SEED, 3]), count)
    for n, (image, mask) in enumerate(again, start=1):
        assert (kaggle / name / f"{name}_{n}.tif").read_bytes() == kaggle_3m.tiff_bytes(image)
        assert (kaggle / name / f"{name}_{n}_mask.tif").read_bytes() == \
            kaggle_3m.tiff_bytes(mask)
    before = (kaggle / "data.csv").stat().st_mtime_ns
    kaggle_3m.main(["--out", str(kaggle)])
    assert "3929 slices" in capsys.readouterr().out
    assert (kaggle / "data.csv").stat().st_mtime_ns == before


# --------------------------------------------------------------------------- UNet


def test_unet_reduces_the_nominal_sizes():
    sizes = unet_model.reduced(3, 256, 256, 32)
    assert (sizes.side, sizes.features, sizes.nominal_side) == (32, 4, 256)
    assert unet_model.reduced(3, 16, 16, 32).side == 16
    with pytest.raises(ValueError, match="multiple of 16"):
        unet_model.reduced(3, 250, 250, 32)
    with pytest.raises(ValueError, match="square"):
        unet_model.reduced(3, 256, 128, 32)


def test_the_unet_learns_to_segment(kaggle, tmp_path):
    dataset = unet_data.load(kaggle, 32, cache_dir=tmp_path)
    assert dataset.images.shape == (3929, 3, 32, 32) and dataset.masks.shape == (3929, 1, 32, 32)
    assert list(tmp_path.glob("kaggle_3m_32x32*.npz"))  # the --data-cache
    torch.manual_seed(0)
    model = unet_model.UNetWithLoss(unet_model.reduced(3, 256, 256, 32))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    train, val = dataset.train[:1024], dataset.val[:256]

    def dice() -> float:
        with torch.no_grad():
            _, prediction = model(dataset.images[val], dataset.masks[val])
        numerator, denominator = unet_model.dice_score(prediction, dataset.masks[val])
        return numerator / denominator

    before = dice()
    for epoch in range(3):
        for index in unet_data.epoch_batches(train, 64, epoch):
            loss, _ = model(dataset.images[index], dataset.masks[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    after = dice()
    assert after > before + 0.3, (before, after)


# --------------------------------------------------------------------------- GPT


def test_gpt_xl_configuration_and_reduced_model():
    raw = json.loads(XL_CONFIG.read_text())
    assert (raw["n_layer"], raw["n_embd"], raw["n_head"], raw["vocab_size"],
            raw["n_positions"]) == (48, 1600, 25, 50260, 1024)
    config = gpt2_reduced.GPT2Config.from_file(XL_CONFIG)
    assert 1.55e9 < config.parameters() < 1.56e9
    reduced = config.reduced(1024)
    assert (reduced.n_layer, reduced.n_embd, reduced.n_positions, reduced.vocab_size) == \
        (2, 64, 32, 512)
    for path in (HUMAN_DECISIONS, COMPILER_CONFIGS,
                 IMAGE / "unet" / "jsons" / "compiler_configs" /
                 "unet_compiler_configs_no_inst.json"):
        json.loads(path.read_text())


def test_gpt_corpus_is_deterministic_sharded_and_small(corpus, tmp_path):
    shards = sorted(corpus.glob("train_*.npy"))
    assert [p.name for p in shards] == ["train_0_of_2.npy", "train_1_of_2.npy"]
    tokens = np.load(shards[0])
    assert tokens.shape == (24, 1024) and tokens.dtype == np.uint16
    vocab = json.loads((corpus / "vocab.json").read_text())
    assert vocab["<|endoftext|>"] == 0 and int(tokens.max()) < len(vocab) <= 512
    again = gpt_corpus.build(tmp_path / "again", shards=2, sequences_per_shard=24,
                             dev_sequences=4)
    for name in ("train_0_of_2.npy", "train_1_of_2.npy", "dev_0_of_1.npy"):
        assert hashlib.sha256((again / name).read_bytes()).digest() == \
            hashlib.sha256((corpus / name).read_bytes()).digest()
    text = gpt_corpus.decode(tokens[0, :200])
    assert " . " in text and "<|endoftext|>" in text
    full = gpt_corpus.TRAIN_SHARDS * gpt_corpus.SEQUENCES_PER_SHARD * 1024 * 2
    assert full < 20_000_000


def test_the_reduced_gpt_learns_the_corpus(corpus):
    torch.manual_seed(0)
    config = gpt2_reduced.GPT2Config.from_file(XL_CONFIG).reduced(1024)
    model = gpt2_reduced.GPT2LMHeadModel(config)
    samples = np.concatenate([np.load(p) for p in sorted(corpus.glob("train_*.npy"))])
    samples = torch.from_numpy(samples.reshape(-1, config.n_positions).astype(np.int64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.00025 * gpt2_reduced.LR_SCALE,
                                  weight_decay=0.1)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(40):
        ids = samples[torch.randint(len(samples), (16,), generator=generator)]
        loss, _ = model(ids, ids)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] > 6.0  # about log(512): nothing known yet
    assert sum(losses[-5:]) / 5 < losses[0] - 1.0, losses


# --------------------------------------------------------------------------- scripts

ALL_SCRIPTS = sorted(SCRIPTS.rglob("*.sh"))


def test_the_documented_scripts_exist_and_parse():
    names = {p.relative_to(SCRIPTS).as_posix() for p in ALL_SCRIPTS}
    assert {"anl/Unet2d.sh", "anl/unet_batch.sh", "anl/Gpt1.5B_single.sh",
            "anl/Gpt1.5B_compile.sh", "anl/Gpt1.5B_run.sh", "sn10-unet/unet_all.sh",
            "sn10-unet/unet_batch.sh", "sn10-unet/unet_compile_run_inf_rl.sh"} <= names
    for script in ALL_SCRIPTS:
        assert os.access(script, os.X_OK), script
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, (script, result.stderr)


@pytest.mark.parametrize("script, args", [
    ("anl/Unet2d.sh", ["foo"]),
    ("anl/Unet2d.sh", []),
    ("anl/Unet2d.sh", ["foo", "256", "256", "1", "id"]),
    ("anl/Unet2d.sh", ["compile", "256", "256", "8", "id"]),
    ("anl/Unet2d.sh", ["run", "250", "256", "1", "id"]),
    ("anl/Unet2d.sh", ["prun", "256", "x", "8", "id"]),
    ("anl/unet_batch.sh", ["8"]),
    ("anl/Gpt1.5B_single.sh", ["-h"]),
    ("anl/Gpt1.5B_compile.sh", ["a", "b"]),
    ("anl/Gpt1.5B_run.sh", ["--help"]),
    ("sn10-unet/unet_all.sh", ["foo"]),
    ("sn10-unet/unet_batch.sh", ["two", "1"]),
    ("sn10-unet/unet_compile_run_inf_rl.sh", ["foo", "32", "1"]),
    ("sn10-unet/unet_compile_run_inf_rl.sh", ["compile", "32"]),
])
def test_scripts_print_their_usage_on_bad_arguments(script, args, tmp_path):
    env = {**os.environ, "RESULTS_DIR": str(tmp_path / "results")}
    result = subprocess.run([str(SCRIPTS / script), *args], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=30)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Usage" in result.stderr or "is not a number" in result.stderr, result.stderr
    assert not (tmp_path / "results").exists()  # nothing written before the check


def test_the_scripts_keep_the_documented_commands():
    unet2d = (SCRIPTS / "anl" / "Unet2d.sh").read_text()
    assert "--tasks-per-node ${NP} --nodes 1 --nodelist $(hostname) --cpus-per-task=${cpus} " \
           "$(pwd)/unet_batch.sh" in unet2d
    assert "unet_train_${BS}_${2}_NP_${NUM_TILES}  --data-parallel -ws 2" in unet2d
    assert 'MODEL_NAME="Unet2d"' in unet2d and "/${MODEL_NAME}.out" in unet2d
    gpt = (SCRIPTS / "anl" / "Gpt1.5B_compile.sh").read_text()
    assert "--output=${HOME}/slurm-%A.out --ntasks ${GPT_NTASKS:-32} --gres=rdu:1 " \
           "--ntasks-per-node ${GPT_NTASKS_PER_NODE:-16}  --nodes ${GPT_NODES:-2} " \
           "--cpus-per-task=${CPUS_PER_TASK:-8}" in gpt
    run = (SCRIPTS / "anl" / "Gpt1.5B_run.sh").read_text()
    assert "--steps_this_run ${STEPS_THIS_RUN} --min_throughput 299000 --max_throughput " \
           "600000 --pef=${OUTDIR}/gpt15/gpt15.pef" in run


def test_the_gpt_hook_accepts_every_documented_argument():
    """Every flag the ALCF scripts pass is one the hook (or SambaFlow's parser) declares."""
    tree = ast.parse((NLP / "transformers_hook.py").read_text())
    declared = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                and node.value.startswith("-")}
    framework = {"-b", "--mac-v2", "--mac-human-decision", "--compiler-configs-file",
                 "--data-parallel", "-ws", "--num-tiles", "--pef-name", "--output-folder",
                 "--reduce-on-rdu", "--pef"}
    for script in ("Gpt1.5B_single.sh", "Gpt1.5B_compile.sh", "Gpt1.5B_run.sh"):
        text = (SCRIPTS / "anl" / script).read_text()
        for command in re.findall(r"transformers_hook\.py (?:compile|run)[^\"]*", text):
            flags = set(re.findall(r"(?<=\s)(--?[A-Za-z][\w-]*)", command))
            assert flags - declared - framework == set(), (script, flags - declared - framework)


# --------------------------------------------------------------------------- end to end


def _sambaflow_ready() -> str | None:
    try:
        import sambaflow.samba  # noqa: F401
        from aitestbed.sambanova.snd.server import SndServer  # noqa: F401
    except ImportError as err:
        return f"the sambaflow package is not importable: {err}"
    return None


@pytest.fixture
def rdu_node(tmp_path, monkeypatch):
    """An in-process snd for an SN30 node, and a Slurm job holding one of its RDUs."""
    reason = _sambaflow_ready()
    if reason:
        pytest.skip(reason)
    from aitestbed.sambanova.snd.server import SndServer

    socket_path = tmp_path / "snd.sock"
    server = SndServer(socket_path, tmp_path / "snd-state", node="sn30-r1-h1", tiles_per_rdu=8)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    job = "31337"
    with server.lock:  # what Slurm's prolog asks snd for: one RDU for the job
        server.rdus.reserve(job, pwd.getpwuid(os.getuid()).pw_name, 1)
    env = {**os.environ, "AITESTBED_SND_SOCKET": str(socket_path), "SLURM_JOB_ID": job,
           "SF_RNT_LOG_FILE": str(tmp_path / "sn.log"), "AITESTBED_TIME_SCALE": "0",
           "OMP_NUM_THREADS": "2",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "emulator"),
                                          os.environ.get("PYTHONPATH", "")])}
    yield env
    server.shutdown()
    server.server_close()


def _run(args: list, env: dict, cwd: Path) -> str:
    result = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                            env=env, cwd=cwd, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_unet_compiles_and_trains_on_an_emulated_rdu(rdu_node, kaggle, tmp_path):
    size = ["--in-channels=3", "--in-width=256", "--in-height=256", "--batch-size=256"]
    out = _run([IMAGE / "segmentation" / "compile.py", "compile", "--mac-v2", *size,
                "--enable-conv-tiling", "--num-tiles=4", "--pef-name=unet_train_256_256_single_4",
                "--output-folder=out/Unet2d"], rdu_node, tmp_path)
    assert "Compilation succeeded." in out
    pef = tmp_path / "out/Unet2d/unet_train_256_256_single_4/unet_train_256_256_single_4.pef"
    assert pef.is_file()
    out = _run([IMAGE / "segmentation" / "hook.py", "run", f"--data-cache={tmp_path / 'cache'}",
                "--data-in-memory", "--num-workers=4", "--enable-tiling", "--min-throughput",
                "395", *size, "--init-features", "32", "--epochs", "2", "--max-steps", "2",
                "--data-dir", kaggle, "--log-dir", "log_dir_unet", f"--pef={pef}"],
               rdu_node, tmp_path)
    assert "3339 for training, 590 for validation" in out
    assert re.search(r"Epoch \[2/2\], train loss: \d\.\d{4}, validation loss: \d\.\d{4}, "
                     r"validation Dice: \d\.\d{4}", out)
    match = re.search(r"inner train loop time : ([\d.]+) for 2 epochs, number of global steps: "
                      r"4, e2e samples_per_sec: ([\d.]+)", out)
    assert match, out
    # The documented single-instance rate: 130 steps of 256 in 374.68 s.
    assert float(match[1]) == pytest.approx(4 * 374.6789753437042 / 130, rel=1e-3)
    assert float(match[2]) == pytest.approx(88.8227, rel=1e-3)
    assert (tmp_path / "log_dir_unet" / "training.csv").is_file()


def test_gpt_compiles_and_trains_on_an_emulated_rdu(rdu_node, corpus, tmp_path):
    common = ["--module_name", "gpt2_pretrain", "--task_name", "clm", "--max_seq_length", "1024",
              "-b", "16", f"--output_dir={tmp_path}/hf_output", "--overwrite_output_dir",
              "--do_train", "--per_device_train_batch_size", "16", "--cache",
              f"{tmp_path}/cache/", "--tokenizer_name", "gpt2", "--model_name", "gpt2",
              "--non_split_head", "--skip_broadcast_patch", "--no_index_select_patch",
              "--config_name", XL_CONFIG, "--max_grad_norm_clip", "1.0"]
    out = _run([NLP / "transformers_hook.py", "compile", *common, "--mac-v2",
                "--mac-human-decision", HUMAN_DECISIONS, "--compiler-configs-file",
                COMPILER_CONFIGS, "--weight_decay", "0.1", "--num-tiles", "4",
                "--pef-name=gpt15_single", f"--output-folder={tmp_path}"], rdu_node, tmp_path)
    assert "Compilation succeeded." in out
    out = _run([NLP / "transformers_hook.py", "run", *common, "--skip_checkpoint",
                "--data_dir", corpus, "--logging_steps", "1", "--max_steps", "900000",
                "--learning_rate", "0.00025", "--steps_this_run", "5",
                f"--pef={tmp_path}/gpt15_single/gpt15_single.pef"], rdu_node, tmp_path)
    assert out.count("{'loss': ") == 5
    summary = ast.literal_eval(next(line for line in out.splitlines()
                                    if line.startswith("{'e2e_train_time'")))
    assert summary["training_sequences_per_second"] == pytest.approx(
        5 * 16 * 1024 / summary["e2e_train_time"])
    assert 1.0 < summary["e2e_train_time"] / 5 < 4.0  # ~2.4-2.7 device seconds a step
    assert 0 < summary["final_loss"] < 7
    assert json.loads((tmp_path / "hf_output" / "train_results.json").read_text()) == summary
