"""The shared device models: the IPU's capacity and checks, device time, timing."""

import pytest
from aitestbed.devices import clock, host
from aitestbed.devices.base import (
    Allocation,
    InsufficientDevicesError,
    InvalidDeviceCountError,
    NoDeviceError,
    OutOfMemoryError,
)
from aitestbed.graphcore import ipu, timing
from aitestbed.graphcore.vipu.client import VipuError


def test_bow_ipu_and_pod64_have_the_documented_capacity():
    assert ipu.BOW_IPU.cores == 1472
    assert ipu.BOW_IPU.memory_bytes == 900e6 and ipu.BOW_IPU.memory_name == "In-Processor-Memory"
    assert ipu.BOW_POD64.chips == 64 and ipu.BOW_POD64.cores == 94_208
    assert ipu.BOW_POD64.memory_bytes == 57.6e9


@pytest.mark.parametrize("per_replica, replicas, reserved", [
    (1, 1, 1), (2, 1, 2), (4, 4, 16), (1, 64, 64), (2, 2, 4),
])
def test_power_of_two_counts_are_reserved_as_they_are(per_replica, replicas, reserved):
    assert ipu.ipus_to_reserve(per_replica, replicas) == reserved


def test_other_counts_need_auto_round_num_ipus():
    with pytest.raises(InvalidDeviceCountError, match=r"^The model specifies the use of 3 IPUs, "
                       r"however PopTorch must reserve a minimum of 4 in order"):
        ipu.ipus_to_reserve(3, 1)
    assert ipu.ipus_to_reserve(3, 1, auto_round=True) == 4
    assert ipu.ipus_to_reserve(3, 2, auto_round=True) == 8


def _allocation(n):
    return Allocation(ipu.BOW_POD64, "slurm_7", tuple(range(16, 16 + n)))


def test_acquiring_without_an_allocation_fails_as_poptorch_does():
    with pytest.raises(NoDeviceError) as err:
        ipu.acquire(1, None)
    assert str(err.value) == ("Failed to acquire 1 IPU(s)\nNo IPU detected in the system.\n"
                              "For more information use the Graphcore command-line tool "
                              "`gc-monitor`.")


def test_acquiring_more_than_the_partition_holds_fails():
    assert ipu.acquire(2, _allocation(4)) == (16, 17)
    with pytest.raises(InsufficientDevicesError, match="No device found on the system with 8 "
                       "IPUs: the configuration needs changing"):
        ipu.acquire(8, _allocation(4))


class _FakeVipu:
    def __init__(self, partitions):
        self.partitions = partitions

    def partition(self, name):
        if name not in self.partitions:
            raise VipuError(f"partition {name} not found", 404)
        return self.partitions[name]


def test_the_allocation_is_the_jobs_vipu_partition():
    env = {"IPUOF_VIPU_API_PARTITION_ID": "slurm_7"}
    found = ipu.allocation_from_environment(env, _FakeVipu({"slurm_7": {"ipus": [3, 4]}}))
    assert found.chip_ids == (3, 4) and found.name == "slurm_7"
    assert ipu.allocation_from_environment({}, _FakeVipu({})) is None
    assert ipu.allocation_from_environment(env, _FakeVipu({})) is None  # a job already over


def test_a_program_too_large_for_an_ipu_fails_with_poplars_out_of_memory():
    ipu.check_memory([ipu.BOW_IPU.memory_bytes, 10])
    with pytest.raises(OutOfMemoryError, match=r"^Out of memory: .* IPU 1 needs"):
        ipu.check_memory([10, ipu.BOW_IPU.memory_bytes + 1])


def test_wall_time_follows_device_time_by_the_scale():
    now = [0.0]
    slept = []
    fake = {"monotonic": lambda: now[0], "sleep": lambda s: (slept.append(s),
                                                            now.__setitem__(0, now[0] + s))}
    documented = clock.VirtualClock(1.0, **fake)
    documented.advance(20.0)
    assert slept == [20.0] and documented.device_seconds == 20.0
    fast = clock.VirtualClock(0.0, **fake)
    fast.advance(1680.0)
    assert slept == [20.0] and fast.device_seconds == 1680.0  # no waiting by default
    half = clock.VirtualClock(0.5, **fake)
    now[0] += 4.0  # the real computation already took 4 s
    half.advance(10.0)
    assert slept[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("raw", ["fast", "-1", "inf", "nan"])
def test_a_bad_time_scale_is_a_clear_error(raw):
    with pytest.raises(clock.TimeScaleError, match="AITESTBED_TIME_SCALE"):
        clock.time_scale({"AITESTBED_TIME_SCALE": raw})
    assert clock.time_scale({}) == 0.0



def test_a_facade_starts_with_bars_on_device_time_or_stops_on_a_bad_time_scale(
        monkeypatch, capsys):
    tqdm_std = pytest.importorskip("tqdm.std")
    monkeypatch.setattr(tqdm_std, "time", tqdm_std.time)
    monkeypatch.setenv("AITESTBED_TIME_SCALE", "0")
    runtime = host.start(host.FacadeRuntime)
    assert tqdm_std.time == runtime.clock.now
    monkeypatch.setenv("AITESTBED_TIME_SCALE", "fast")
    with pytest.raises(SystemExit) as stop:
        host.start(host.FacadeRuntime)
    assert stop.value.code == 1
    assert capsys.readouterr().err.startswith("AITESTBED_TIME_SCALE='fast' is not a time scale")


def test_a_facade_tunes_torch_threads_once_and_may_leave_them_to_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(host, "keep_openblas_single_threaded", lambda: calls.append("blas"))
    runtime = host.FacadeRuntime()
    runtime.tune_cpu()
    runtime.tune_cpu()
    assert calls == [runtime.torch_threads(), "blas"]

    class Untouched(host.FacadeRuntime):
        def torch_threads(self):
            return None

    calls.clear()
    Untouched().tune_cpu()
    assert calls == ["blas"]

def test_timing_reproduces_the_documented_runs():
    mnist = timing.calibration("mnist")
    assert timing.compile_seconds(mnist.parameters) == pytest.approx(20.0)
    # "Epochs: 100%|...| 10/10 [01:35<00:00, 9.57s/it]" includes the 20 s compilation
    epochs_10 = 10 * timing.step_seconds(mnist.parameters, 1, 8, 60_000 // 8)
    assert 20.0 + epochs_10 == pytest.approx(95.0)
    # "10/10 [01:26<00:00, 8.64s/it]" at batch 4, compilation cached: within 10 %
    batch_4 = 10 * timing.step_seconds(mnist.parameters, 1, 4, 60_000 // 4)
    assert batch_4 == pytest.approx(86.0, rel=0.10)
    assert timing.compile_seconds(mnist.parameters, training=False) == pytest.approx(13.0)
    resnet = timing.calibration("resnet50-pod4")
    assert timing.compile_seconds(resnet.parameters) == pytest.approx(386.0)  # 6:26
    assert timing.samples_per_second(resnet.parameters, 4) == pytest.approx(4477.0)
    assert timing.samples_per_second(resnet.parameters, 4) * resnet.first_epoch_ratio == \
        pytest.approx(1886.0)
    gpt2 = timing.calibration("gpt2-16ipu")
    assert timing.compile_seconds(gpt2.parameters) == pytest.approx(1680.0)
    assert timing.samples_per_second(gpt2.parameters, 16) == pytest.approx(1064.0)


def test_other_models_fall_between_the_calibrations():
    middle = timing.compile_seconds(2_000_000)
    assert 20.0 < middle < 386.0
    assert timing.compile_seconds(10) == pytest.approx(20.0)  # held at the ends
    assert timing.samples_per_second(2_000_000, 2) == pytest.approx(
        2 * timing.samples_per_second(2_000_000, 1))


# -- SambaNova RDUs ------------------------------------------------------------------------


def test_datascale_nodes_have_the_documented_rdus_tiles_and_ddr():
    from aitestbed.sambanova import rdu

    assert rdu.SN10_8.chips == rdu.SN30_8.chips == 8  # 4 XRDUs x 2 RDUs
    assert (rdu.SN10_RDU.cores, rdu.SN30_RDU.cores) == (4, 8)
    assert rdu.SN10_RDU.memory_bytes == 6 * 64e9  # six DDR channels of 64 GB (snconfig, sm-01)
    assert rdu.SN30_RDU.memory_bytes * rdu.RDUS_PER_XRDU == 2048e9  # per XRDU
    assert rdu.tile_names(3, 4) == [f"/XRDU_1/RDU_1/TILE_{t}" for t in range(4)]
    assert len([t for r in range(8) for t in rdu.tile_names(r, 8)]) == 64  # sntilestat's rows


def test_a_pef_runs_only_the_batch_size_it_was_compiled_for():
    """(Tile placement is snd's: tests/unit/test_snd.py.)"""
    from aitestbed.sambanova import rdu

    rdu.check_batch_size(32, 32)
    with pytest.raises(rdu.BatchSizeMismatchError, match="compiled for batch size 32, but the "
                       "input has batch size 16"):
        rdu.check_batch_size(32, 16)
