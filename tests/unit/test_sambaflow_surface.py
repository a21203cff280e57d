"""The sambaflow API that SambaNova's public tutorials use beyond the starters' (logreg,
LeNet, the Hugging Face GPT-2 fine-tuning), tried with small models of our own.

parse_yaml_to_args, the flattening MNIST transform, sambacollections.OrderedSet,
sambaflow.logging.samba_logger, samba.directives.op_fusion, samba.nn.parameter,
samba.addmm, and a training step of a token model as the GPT-2 tutorial takes it:
optional forward arguments traced as None, int16 positions and targets, a per-token
loss whose gradient the app sets (init_output_grads, `sn_grad`), one optimizer per
parameter group, the dropout probability as a hyper-parameter.
"""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "emulator"


@pytest.fixture
def fresh_args(monkeypatch):
    from sambaflow.samba.utils import argparser

    monkeypatch.setattr(argparser, "last_args", None)
    return argparser


# -- parse_yaml_to_args ---------------------------------------------------------------------
def _app_args(argparser, argv):
    def add_args(parser):
        parser.add_argument("--lr", type=float, default=0.0015)
        parser.add_argument("--num-epochs", "-e", type=int, default=1)
        parser.add_argument("--bias", action="store_true")
        parser.add_argument("--yaml-config", default=None, type=str)

    return argparser.parse_app_args(argv=argv, common_parser_fn=add_args)


def test_a_yaml_config_is_laid_over_the_command_line(fresh_args, tmp_path):
    config = tmp_path / "logreg.yaml"
    config.write_text("lr: 0.01\nnum-epochs: 3\n--bias: true\nbatch_size: 16\n"
                      "extra_list: [1, 2]\n")
    args = _app_args(fresh_args, ["run", "--pef", "x.pef", "-e", "2",
                                  "--yaml-config", str(config)])
    composed = fresh_args.parse_yaml_to_args(args.yaml_config, args)
    assert composed is args  # updated in place (session.compile reads the same args)
    assert (args.lr, args.num_epochs, args.bias, args.batch_size) == (0.01, 3, True, 16)
    assert args.extra_list == [1, 2] and args.pef == "x.pef"
    alone = fresh_args.parse_yaml_to_args(config)
    assert alone.num_epochs == 3 and not hasattr(alone, "pef")


@pytest.mark.parametrize("text, message", [
    (None, "does not exist"),
    ("lr: [0.1\n", "is not valid YAML (line 2, column 1)"),
    ("- 1\n- 2\n", "must map argument names to values, not be a list"),
    ("batch_size: 0\n", "batch_size: 0 is not a count of at least 1"),
    ("3: x\n", "3 is not an argument name"),
])
def test_a_bad_yaml_config_is_the_runtime_s_error(fresh_args, tmp_path, text, message):
    from sambaflow._errors import SambaError

    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text)
    args = _app_args(fresh_args, ["compile"])
    with pytest.raises(SambaError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[")):
        fresh_args.parse_yaml_to_args(str(config), args)


def test_an_app_with_a_bad_yaml_config_exits_1_without_a_traceback(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(
        "import sys\n"
        "from sambaflow import samba  # noqa: F401  (the runtime's error reporting)\n"
        "from sambaflow.samba.utils.argparser import parse_app_args, parse_yaml_to_args\n"
        "def add(p):\n    p.add_argument('--yaml-config')\n"
        "args = parse_app_args(argv=sys.argv[1:], common_parser_fn=add)\n"
        "parse_yaml_to_args(args.yaml_config, args)\n")
    (tmp_path / "c.yaml").write_text("lr: {0.1\n")
    environment = {**os.environ, "PYTHONPATH": str(EMULATOR), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, str(app), "compile", "--yaml-config", "c.yaml"],
                            cwd=tmp_path, env=environment, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "[Error][SAMBA]# YAML config c.yaml is not valid YAML" in result.stderr


def test_the_subcommands_help_says_what_they_are(fresh_args, capsys):
    with pytest.raises(SystemExit):
        fresh_args.parse_app_args(argv=["--help"])
    assert "different modes of operation" in capsys.readouterr().out


def test_resources_scaling_factors_and_arch_are_framework_arguments(fresh_args, capsys):
    args = fresh_args.parse_app_args(argv=["compile", "--resources-scaling-factors", "0.8",
                                           "0.8", "0.8", "--arch", "sn20", "--o0"])
    assert args.resources_scaling_factors == [0.8, 0.8, 0.8]
    assert args.arch == "sn20" and args.o0
    with pytest.raises(SystemExit) as stop:
        fresh_args.parse_app_args(argv=["compile", "--resources-scaling-factors", "1.5"])
    assert stop.value.code == 2
    assert "each factor must be in (0, 1], not 1.5" in capsys.readouterr().err


# -- the MNIST transform ------------------------------------------------------------------
def _digit():
    from PIL import Image

    pixels = torch.arange(784, dtype=torch.uint8).reshape(28, 28)
    return Image.fromarray(pixels.numpy(), mode="L"), pixels


def test_dataset_transform_flattens_for_an_app_with_num_features():
    from sambaflow.samba.utils.dataset.mnist import dataset_transform

    image, pixels = _digit()
    expected = (pixels.float() / 255 - 0.1307) / 0.3081
    flat = dataset_transform({"num_features": 784, "batch_size": 1})(image)
    assert flat.shape == (784,)
    assert torch.allclose(flat, expected.reshape(-1), atol=1e-6)
    square = dataset_transform({"batch_size": 1})(image)
    assert square.shape == (1, 28, 28)
    assert torch.allclose(square[0], expected, atol=1e-6)
    assert dataset_transform({"num_features": 784, "flatten": False})(image).shape == (1, 28, 28)
    batch = dataset_transform({"num_features": 784})(pixels.unsqueeze(0).repeat(3, 1, 1))
    assert batch.shape == (3, 784)


def test_dataset_transform_places_the_node_s_mnist_where_torchvision_looks(tmp_path,
                                                                           monkeypatch, capsys):
    from sambaflow.samba.utils.dataset import mnist

    node = tmp_path / "node" / "MNIST" / "raw"
    node.mkdir(parents=True)
    for name in mnist.FILES:
        (node / name).write_bytes(name.encode())
    monkeypatch.setenv(mnist.SOURCE_ENV, str(tmp_path / "node"))
    monkeypatch.chdir(tmp_path)
    mnist.dataset_transform({"data_dir": "mnist_data", "num_features": 784})
    raw = tmp_path / "mnist_data" / "MNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(mnist.FILES)
    assert (raw / mnist.FILES[0]).read_bytes() == mnist.FILES[0].encode()
    assert "(this system is offline: nothing is downloaded)" in capsys.readouterr().out
    mnist.dataset_transform({"data_dir": "mnist_data"})  # already there: nothing printed
    assert capsys.readouterr().out == ""
    monkeypatch.setenv(mnist.SOURCE_ENV, str(tmp_path / "nowhere"))
    mnist.dataset_transform({"data_dir": "elsewhere"})  # no local copy: torchvision's turn
    assert not (tmp_path / "elsewhere").exists()


# -- small pieces -------------------------------------------------------------------------
def test_ordered_set_keeps_the_order_parameters_were_added_in():
    from sambaflow.sambacollections import OrderedSet

    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(5)]
    chosen = OrderedSet([params[3], params[0], params[3], params[4]])
    assert list(chosen) == [params[3], params[0], params[4]] and len(chosen) == 3
    assert params[0] in chosen and params[1] not in chosen
    others = OrderedSet((str(i), p) for i, p in enumerate(params) if p not in chosen)
    assert [name for name, _ in others] == ["1", "2"]
    chosen.discard(params[0])
    chosen.add(params[1])
    assert list(chosen) == [params[3], params[4], params[1]]


def test_samba_logger_honours_log_limit_and_the_log_level(fresh_args, capsys):
    from sambaflow.logging import samba_logger

    fresh_args.parse_app_args(argv=["compile"])
    for _ in range(3):
        samba_logger.warning("patched forward used", log_limit=1)
    samba_logger.info("not shown at the default level")
    assert capsys.readouterr().out == "[Warning][SAMBA]# patched forward used\n"
    fresh_args.parse_app_args(argv=["compile", "--log-level", "error"])
    samba_logger.warning("hidden at error")
    samba_logger.error("shown at %s", "error")
    assert capsys.readouterr().out == "[Error][SAMBA]# shown at error\n"


def test_op_fusion_marks_the_module_and_changes_no_numerics():
    from sambaflow.samba.directives import fusion_groups, op_fusion

    layers = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    x = torch.randn(2, 3)
    before = layers(x)
    for layer in layers:
        assert op_fusion(layer, "Encoder") is layer
    assert fusion_groups(layers) == {"Encoder": 2}
    assert torch.equal(layers(x), before)
    with pytest.raises(TypeError):
        op_fusion(torch.zeros(1), "Encoder")


def test_samba_parameter_from_a_shape_and_a_materializer():
    from sambaflow import samba
    from sambaflow.samba.nn.parameter import SambaParameter

    assert SambaParameter is samba.SambaParameter
    source = torch.arange(6.0).reshape(2, 3)
    lazy = SambaParameter(shape=reversed(source.shape), dtype=torch.float32,
                          materializer=lambda this, original=source: original.transpose(1, 0),
                          requires_grad=False)
    assert lazy.shape == (3, 2) and not lazy.requires_grad
    assert torch.equal(lazy.torch_tensor(), source.t())
    assert type(lazy.torch_tensor()) is torch.Tensor
    assert SambaParameter(torch.ones(2)).requires_grad
    with pytest.raises(ValueError, match="not the declared"):
        SambaParameter(shape=(2, 2), materializer=lambda this: torch.zeros(3))


def test_addmm_takes_a_transposed_weight_and_inputs_of_any_rank():
    from sambaflow import samba

    x, weight, bias = torch.randn(2, 5, 4), torch.randn(3, 4), torch.randn(3)
    assert torch.allclose(samba.addmm(bias, x, weight, is_transposed=True),
                          x @ weight.t() + bias, atol=1e-6)
    assert torch.allclose(samba.addmm(bias, x, weight.t()), x @ weight.t() + bias, atol=1e-6)
    assert torch.allclose(samba.addmm(bias, x[0], weight, beta=0.5, alpha=2.0,
                                      is_transposed=True),
                          0.5 * bias + 2.0 * (x[0] @ weight.t()), atol=1e-6)


# -- a GPT-style training step --------------------------------------------------------------
VOCAB, SEQ, BATCH = 40_000, 6, 2


class TokenModel(torch.nn.Module):
    """forward(ids, attention_mask=None, positions=None, labels=None) -> (per-token loss,
    logits), as a Hugging Face causal LM patched for the RDU returns them."""

    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(VOCAB, 4)
        self.positions = torch.nn.Embedding(SEQ, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.drop = torch.nn.Dropout(0.5)
        self.head = torch.nn.Linear(4, VOCAB)

    def forward(self, ids, attention_mask=None, positions=None, labels=None):
        hidden = self.drop(self.norm(self.tokens(ids) + self.positions(positions)))
        logits = self.head(hidden)
        loss = F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1), reduction="none")
        return loss, logits * 1


def _token_batch(samba):
    ids = torch.tensor([[5, 33_000, 39_999, 7, 12, 50], [1, 2, 3, 34_567, 4, 5]])
    labels = torch.cat([ids[:, 1:], torch.full((BATCH, 1), -100)], dim=1)
    positions = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ)
    as_sent = (samba.from_torch_tensor(ids.int(), name="input_ids"),
               samba.from_torch_tensor(positions.short(), name="input_position_ids"),
               samba.from_torch_tensor(labels.short(), name="labels"))
    return ids, labels, positions, as_sent


def test_a_gpt_style_step_with_output_gradients_and_an_optimizer_per_group(
        snd, fresh_args, tmp_path, monkeypatch):
    import sambaflow.samba.utils as utils
    from sambaflow import samba
    from sambaflow._errors import SambaError
    from sambaflow._runtime import runtime

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AITESTBED_SN_PRECISION", "fp32")
    monkeypatch.setenv("SF_RNT_LOG_FILE", str(tmp_path / "sn.log"))
    torch.manual_seed(0)
    model = TokenModel()
    gold = copy.deepcopy(model)
    samba.from_torch_model_(model)
    ids, labels, positions, (sn_ids, sn_positions, sn_labels) = _token_batch(samba)
    traced = (sn_ids, None, sn_positions, sn_labels)  # attention_mask: not in the graph
    embeddings = [model.tokens.weight, model.positions.weight]
    others = [p for p in model.parameters() if all(p is not e for e in embeddings)]
    optimizers = [samba.optim.SGD(embeddings, lr=0.0), samba.optim.SGD(others, lr=0.0)]
    try:
        pef = samba.session.compile(model, traced, optimizers, name="tokens",
                                    init_output_grads=True, config_dict={"output_folder": "out"})
        outputs = utils.trace_graph(model, traced, optimizers, pef=pef, init_output_grads=True)
        weights = torch.rand(BATCH * SEQ)
        outputs[0].sn_grad = weights
        loss, logits = samba.session.run([sn_ids, sn_positions, sn_labels], outputs,
                                         hyperparam_dict={"lr": 0.5, "p": 0.0},
                                         section_types=["FWD", "BCKWD", "GRADNORM", "OPT"])
        assert model.drop.p == 0.0  # the dropout probability came with the hyper-parameters
        # The same step in plain torch on int64 ids (int16 carries ids up to 65,535).
        gold.drop.p = 0.0
        gold_loss, gold_logits = gold(ids, None, positions, labels)
        assert torch.allclose(loss, gold_loss.detach(), atol=1e-5)
        assert torch.allclose(logits, gold_logits.detach(), atol=1e-5)
        (gold_loss * weights).sum().backward()
        with torch.no_grad():
            for parameter in gold.parameters():
                parameter -= 0.5 * parameter.grad
        for (name, parameter), expected in zip(model.named_parameters(), gold.parameters(),
                                               strict=True):
            assert torch.allclose(parameter.sn_data, expected, atol=1e-5), name
        # Forward only: nothing moves.
        before = [p.sn_data.clone() for p in model.parameters()]
        samba.session.run([sn_ids, sn_positions, sn_labels], outputs,
                          hyperparam_dict={"lr": 0.5, "p": 0.0}, section_types=["FWD"])
        assert all(torch.equal(b, p.sn_data) for b, p in zip(before, model.parameters(),
                                                             strict=True))
        with pytest.raises(SambaError, match=r"takes 3 input tensors \(input_ids, "
                                             r"input_position_ids, labels\), but 2 were given"):
            samba.session.run([sn_ids, sn_labels], outputs)
    finally:
        samba.session.close()
        runtime._deferred.clear()


def test_gradient_norm_clipping_is_kept_by_the_rdu_s_optimizer(snd, fresh_args, tmp_path,
                                                               monkeypatch):
    import sambaflow.samba.utils as utils
    from sambaflow import samba
    from sambaflow._runtime import runtime

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AITESTBED_SN_PRECISION", "fp32")
    monkeypatch.setenv("SF_RNT_LOG_FILE", str(tmp_path / "sn.log"))
    model = torch.nn.Sequential(torch.nn.Linear(3, 1))

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            return (self.net(x) * 1000).sum(), x

    wrapped = Loss()
    samba.from_torch_model_(wrapped)
    x = samba.randn(4, 3, name="x", batch_dim=0)
    optimizer = samba.optim.SGD(wrapped.parameters(), lr=1.0, max_grad_norm=0.1)
    try:
        pef = samba.session.compile(wrapped, (x,), optimizer, name="clip",
                                    config_dict={"output_folder": "out"})
        outputs = utils.trace_graph(wrapped, (x,), optimizer, pef=pef)
        before = [p.sn_data.clone() for p in wrapped.parameters()]
        samba.session.run([x], outputs)
        step = torch.cat([(b - p.sn_data).flatten() for b, p in zip(before, wrapped.parameters(),
                                                                    strict=True)])
        assert step.norm().item() == pytest.approx(0.1, rel=1e-4)  # lr 1 x the clipped norm
    finally:
        samba.session.close()
        runtime._deferred.clear()
