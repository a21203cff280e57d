"""PopTorch API that Graphcore's public tutorials use (examples v3.3.0), on our own small models.

Block placement by execution strategy (the pipelining tutorial), tensor anchoring
(the observing_tensors tutorial), and whatever else running the tutorials unmodified
showed missing.
"""

import poptorch
import pytest
import torch

pytestmark = pytest.mark.unit


class Named(torch.nn.Module):
    """Four linear layers in blocks "A".."D" (no ipu_id), the loss in "D"."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(6, 6) for _ in range(4))

    def forward(self, x, target=None):
        for name, layer in zip("ABCD", self.layers, strict=True):
            with poptorch.Block(name):
                x = layer(x)
        if target is None:
            return x
        with poptorch.Block("D"):
            loss = torch.nn.functional.mse_loss(x, target)
        return x, loss


def ipus_used(model, opts, allocation_size=8):
    inference = poptorch.inferenceModel(model, opts)
    inference(torch.randn(2, 6))
    return inference._executable.ipus_per_replica


def test_named_blocks_go_where_the_stages_say(allocation):
    allocation(8)
    stages = [poptorch.Stage(name).ipu(i) for i, name in enumerate("ABCD")]
    opts = poptorch.Options().setExecutionStrategy(poptorch.PipelinedExecution(*stages))
    assert ipus_used(Named(), opts) == 4
    two = poptorch.PipelinedExecution(poptorch.Stage("A", "B").ipu(0),
                                      poptorch.Stage("C", "D").ipu(1))
    assert ipus_used(Named(), poptorch.Options().setExecutionStrategy(two)) == 2
    # Block ids alone: one stage each, on the IPU of its position.
    sharded = poptorch.ShardedExecution("A", "B", "C", "D")
    assert ipus_used(Named(), poptorch.Options().setExecutionStrategy(sharded)) == 4


def test_a_two_stage_pipeline_trains_on_two_ipus(allocation):
    allocation(2)
    torch.manual_seed(0)
    model = Named()
    strategy = poptorch.PipelinedExecution(poptorch.Stage("A", "B").ipu(0),
                                           poptorch.Stage("C", "D").ipu(1))
    opts = poptorch.Options().deviceIterations(2).setExecutionStrategy(strategy)
    opts.Training.gradientAccumulation(4)
    training = poptorch.trainingModel(model, opts,
                                      torch.optim.SGD(model.parameters(), lr=0.05))
    x = torch.randn(64, 6)
    target = x.flip(1)
    first = training(x, target)[1].item()
    for _ in range(30):
        last = training(x, target)[1].item()
    assert training._executable.ipus_per_replica == 2
    assert training._executable.ipus_reserved == 2
    assert last < first


def test_a_named_block_without_an_ipu_needs_a_stage(allocation):
    allocation(8)
    with pytest.raises(poptorch.Error, match="AutoStage.SameAsIpu was selected but no IPU was "
                       "specified for block A"):
        ipus_used(Named(), poptorch.Options())
    partial = poptorch.PipelinedExecution(poptorch.Stage("A").ipu(0))
    with pytest.raises(poptorch.Error, match=r"Unknown Block 'B' list of expected Blocks: "
                       r"\['A'\]"):
        ipus_used(Named(), poptorch.Options().setExecutionStrategy(partial))


def test_auto_increment_numbers_unnamed_blocks_from_one(allocation):
    allocation(8)

    class Unnamed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(6, 6), torch.nn.Linear(6, 6)

        def forward(self, x):
            with poptorch.Block():
                x = self.a(x)
            with poptorch.Block():
                return self.b(x)

    auto = poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement)
    # Stages 1 and 2: IPUs 1 and 2, so three IPUs (rounded up to four when asked).
    opts = poptorch.Options().setExecutionStrategy(auto).autoRoundNumIPUs(True)
    assert ipus_used(Unnamed(), opts) == 3
    # Unnamed blocks are "0", "1", ... and can be staged by those ids.
    staged = poptorch.PipelinedExecution(poptorch.Stage("0", "1").ipu(0))
    assert ipus_used(Unnamed(), poptorch.Options().setExecutionStrategy(staged)) == 1


def test_begin_block_ipu_ids_and_stage_ipus(allocation):
    allocation(4)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.Linear(6, 6))
    poptorch.BeginBlock(model[1], "second", ipu_id=1)
    assert ipus_used(model, poptorch.Options()) == 2
    # A stage's .ipu() wins over the block's ipu_id.
    moved = poptorch.PipelinedExecution(poptorch.Stage("second").ipu(0))
    assert ipus_used(model, poptorch.Options().setExecutionStrategy(moved)) == 1


def test_stage_checks_its_arguments():
    with pytest.raises(ValueError, match="Block IDs are supposed to be strings"):
        poptorch.Stage(1)
    with pytest.raises(ValueError, match="A associated with more than one stage"):
        poptorch.PipelinedExecution(poptorch.Stage("A"), poptorch.Stage("A", "B"))
    strategy = poptorch.PipelinedExecution(poptorch.Stage("A", "B").ipu(3))
    assert strategy.stage("B").blocks == ("A", "B")


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x, labels=None):
        out = self.fc2(torch.relu(self.fc1(x)))
        if labels is None:
            return out
        return out, torch.nn.functional.cross_entropy(out, labels)


def test_anchored_gradients_and_updates_are_the_real_tensors(allocation):
    allocation(1)
    torch.manual_seed(0)
    model = Mlp()
    opts = poptorch.Options()
    opts.anchorTensor("grad", "Gradient___fc2.weight")
    opts.anchorTensor("updated", "UpdatedVar___fc2.bias")
    opts.anchorTensor("weight", "fc1.weight")
    training = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.5))
    x, labels = torch.randn(8, 4), torch.randint(0, 2, (8,))
    with pytest.raises(poptorch.Error, match="Model must be compiled before calling "
                       "getTensorNames"):
        training.getTensorNames()
    training.compile(x, labels)
    names = training.getTensorNames()
    assert {"fc1.weight", "Gradient___fc2.weight", "UpdatedVar___fc2.bias"} <= set(names)
    with pytest.raises(poptorch.Error, match="No tensor with name grad found"):
        training.getAnchoredTensor("grad")

    reference = Mlp()
    reference.load_state_dict(model.state_dict())
    reference_loss = reference(x, labels)[1]
    reference_loss.backward()
    training(x, labels)
    assert torch.allclose(training.getAnchoredTensor("grad"), reference.fc2.weight.grad)
    assert torch.allclose(training.getAnchoredTensor("weight"), reference.fc1.weight)
    expected_bias = reference.fc2.bias - 0.5 * reference.fc2.bias.grad
    assert torch.allclose(training.getAnchoredTensor("updated"), expected_bias)
    assert torch.equal(training.getAnchoredTensor("updated"), model.fc2.bias.detach())


def test_anchor_modes_follow_the_device_iterations(allocation):
    allocation(1)
    model = Mlp()
    opts = poptorch.Options().deviceIterations(3)
    opts.anchorTensor("final", "Gradient___fc2.bias")  # the training outputs' mode: Final
    opts.anchorTensor("all", "Gradient___fc2.bias", poptorch.OutputMode.All)
    opts.anchorTensor("sum", "Gradient___fc2.bias", poptorch.OutputMode.Sum)
    opts.anchorTensor("every2", "Gradient___fc2.bias", poptorch.OutputMode.EveryN, 2)
    training = poptorch.trainingModel(model, opts)
    training(torch.randn(12, 4), torch.randint(0, 2, (12,)))
    every = training.getAnchoredTensor("all")
    assert every.shape == (3, 2)
    assert torch.equal(training.getAnchoredTensor("final"), every[-1])
    assert torch.allclose(training.getAnchoredTensor("sum"), every.sum(0))
    assert torch.equal(training.getAnchoredTensor("every2"), every[1])


def test_anchoring_a_tensor_the_graph_lacks_fails_at_compile(allocation):
    allocation(1)
    opts = poptorch.Options().anchorTensor("g", "Gradient___fc9.weight")
    with pytest.raises(poptorch.Error, match="no tensor 'Gradient___fc9.weight' in the "
                       "training graph"):
        poptorch.trainingModel(Mlp(), opts)(torch.randn(2, 4), torch.zeros(2, dtype=torch.long))
    # Inference graphs have no gradients.
    opts = poptorch.Options().anchorTensor("g", "Gradient___fc1.weight")
    with pytest.raises(poptorch.Error, match="inference graph"):
        poptorch.inferenceModel(Mlp(), opts)(torch.randn(2, 4))


class SmallConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.norm = torch.nn.GroupNorm(2, 4)
        self.fc = torch.nn.Linear(4 * 6 * 6, 3)

    def forward(self, x, labels=None):
        x = self.fc(torch.flatten(self.norm(torch.relu(self.conv(x))), 1))
        out = torch.log_softmax(x, dim=1)
        return out if labels is None else (out, torch.nn.functional.nll_loss(out, labels))


def test_a_half_precision_model_trains_and_stays_half(allocation):
    allocation(1)
    torch.manual_seed(0)
    model = SmallConv().half()
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=0.01, accum_type=torch.float16,
                                     loss_scaling=1024)
    opts = poptorch.Options()
    opts.Precision.setPartialsType(torch.half)
    training = poptorch.trainingModel(model, opts, optimizer)
    labels = torch.randint(0, 3, (24,))
    x = (torch.randn(24, 1, 8, 8) + labels.view(-1, 1, 1, 1)).half()
    first = training(x, labels)[1]
    for _ in range(20):
        out, loss = training(x, labels)
    assert out.dtype == loss.dtype == torch.float16
    assert loss.item() < first.item()
    assert all(p.dtype == torch.float16 for p in model.parameters())
    inference = poptorch.inferenceModel(model.eval())
    predictions = inference(x)
    assert predictions.dtype == torch.float16
    assert (predictions.argmax(1) == labels).float().mean() > 0.8
