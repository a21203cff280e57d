"""The CS-2 device model: its spec, the wafer fit check and the calibrated timing."""

import pytest
from aitestbed.cerebras import cs2, timing
from aitestbed.devices.base import OutOfMemoryError

pytestmark = pytest.mark.unit

FC_MNIST = cs2.Workload("fc_mnist", 62_710, 39_250, 50, 1, 128)
BERT = cs2.Workload("bert", 335_000_000, 31_254_528, 1024, 128, 1024)
GPTJ = cs2.Workload("gptj", 6_053_381_344, 206_438_400, 4096, 2048, 130)


def global_rates(workload, num_csx, steps, at):
    total, rates = 0.0, {}
    for step in range(1, steps + 1):
        total += timing.step_seconds(workload, step, num_csx)
        if step in at:
            rates[step] = step * workload.batch_size / total
    return total, rates


def test_spec_is_the_documented_wafer():
    assert cs2.WSE2.cores == 850_000
    assert cs2.WSE2.memory_per_core == 48 * 1024
    assert cs2.WSE2.memory_bytes == pytest.approx(40e9, rel=0.05)  # "40GB"
    assert cs2.ALCF_CLUSTER.chips == 2 and cs2.ALCF_CLUSTER.cores == 1_700_000


def test_documented_models_fit_and_an_absurd_one_does_not():
    assert cs2.check_fit(GPTJ, num_csx=2) < cs2.usable_bytes()
    assert cs2.check_fit(GPTJ, num_csx=1) < cs2.usable_bytes()
    assert cs2.check_fit(BERT) < cs2.usable_bytes()
    huge = cs2.Workload("fc_mnist", 10**11, 200_000 * 200_000 + 200_000, 200_000, 1, 128)
    with pytest.raises(OutOfMemoryError, match="does not fit on the CS-2 wafer") as caught:
        cs2.check_fit(huge)
    assert isinstance(caught.value, cs2.WaferOutOfMemoryError)
    assert "--num_csx" in str(caught.value)


def test_activations_are_split_over_the_systems():
    big_batch = BERT.with_(batch_size=32_768)
    with pytest.raises(cs2.WaferOutOfMemoryError):
        cs2.check_fit(big_batch)
    assert cs2.check_fit(big_batch, num_csx=2)


def test_workload_rejects_nonsense():
    with pytest.raises(ValueError, match="unknown workload kind"):
        cs2.Workload("resnet")
    with pytest.raises(ValueError):
        cs2.Workload(batch_size=0)


def test_fc_mnist_matches_the_191_run():
    total, rates = global_rates(FC_MNIST, 1, 10_000, {9_950, 10_000})
    assert rates[10_000] == pytest.approx(26_905.42, rel=0.01)
    assert rates[9_950] == pytest.approx(26_805.42, rel=0.01)
    assert total + timing.checkpoint_seconds(FC_MNIST) == pytest.approx(53.12, rel=0.01)


def test_bert_large_warms_up_then_runs_at_6500():
    total, rates = global_rates(BERT, 1, 1_000, {100, 1_000})
    assert rates[100] == pytest.approx(4_597.49, rel=0.05)
    assert rates[1_000] == pytest.approx(6_493.27, rel=0.02)
    assert total + timing.checkpoint_seconds(BERT) == pytest.approx(229.66, rel=0.02)


def test_gptj_on_two_systems():
    total, rates = global_rates(GPTJ, 2, 500, {100, 500})
    assert rates[100] == pytest.approx(33.83, rel=0.01)
    assert rates[500] == pytest.approx(33.98, rel=0.01)
    assert total + timing.checkpoint_seconds(GPTJ) == pytest.approx(2554.18, rel=0.01)


def test_rates_scale_with_systems_below_linear():
    one = timing.samples_per_second(BERT, 1)
    two = timing.samples_per_second(BERT, 2)
    assert 1.8 * one < two < 2.0 * one


def test_jitter_is_deterministic_small_and_per_block():
    factors = {timing.jitter(BERT, step) for step in range(1, 51)}
    assert len(factors) == 1
    assert timing.jitter(BERT, 1) != timing.jitter(BERT, 51)
    assert all(abs(timing.jitter(GPTJ, s) - 1) <= 0.003 for s in range(1, 1000, 50))


def test_generic_and_eval_workloads():
    generic = cs2.Workload(parameters=10**6, largest_layer_parameters=10**5, hidden_size=512,
                           batch_size=64)
    assert timing.steady_step_seconds(generic) > 0
    assert timing.steady_step_seconds(BERT.with_(training=False)) < \
        timing.steady_step_seconds(BERT)
    assert timing.compile_seconds(BERT, validate_only=True) < timing.compile_seconds(BERT)
    assert timing.compile_seconds(FC_MNIST) < timing.compile_seconds(BERT) < \
        timing.compile_seconds(GPTJ)
