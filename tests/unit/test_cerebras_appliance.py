"""cerebras_appliance (ours) and the cstorch 2.1.1 names the upstream modelzoo uses."""

import logging
import os

import cerebras_pytorch as cstorch
import pytest
import torch
from cerebras_appliance import environment, errors, log, run_utils
from cerebras_appliance.utils.units import convert_byte_unit
from cerebras_pytorch.appliance import errors as pytorch_errors

pytestmark = pytest.mark.unit


def test_errors_are_one_set_of_classes():
    assert pytorch_errors.ApplianceNanError is errors.ApplianceNanError
    assert isinstance(errors.from_message({"exception": "ApplianceNanError", "message": "x"}),
                      cstorch.appliance.ApplianceNanError)


def test_appliance_environ_sets_and_exports(monkeypatch):
    environ = environment.ApplianceEnviron()
    monkeypatch.delenv("AITESTBED_TEST_VAR", raising=False)
    environ["AITESTBED_TEST_VAR"] = "1"
    assert os.environ["AITESTBED_TEST_VAR"] == "1" and environ.exported() == {
        "AITESTBED_TEST_VAR": "1"}
    assert "PATH" in environ and environ["PATH"] == os.environ["PATH"]
    del environ["AITESTBED_TEST_VAR"]
    assert "AITESTBED_TEST_VAR" not in os.environ and environ.exported() == {}
    with pytest.raises(TypeError):
        environ["X"] = 1


def test_log_levels_and_wsc_logger():
    assert log.get_level_name("info") == logging.INFO
    assert log.get_level_name("TRACE") == logging.DEBUG - 5
    assert log.get_level_name("VERBOSE") == logging.INFO - 5
    assert log.get_level_name("15") == 15
    with pytest.raises(ValueError, match="Invalid logging level"):
        log.get_level_name("loud")
    log.wsc_logger.getChild("compile").setLevel(logging.WARNING)
    assert log.collect_wsc_log_settings()["compile"] == logging.WARNING
    log.wsc_logger.getChild("compile").setLevel(logging.NOTSET)


def test_debug_args_round_trip(tmp_path):
    args = run_utils.get_debug_args(None)
    args.debug_usr.worker_resource.memory_bytes = 3 << 30
    run_utils.set_default_ini(args, ws_opt_x=True)
    run_utils.set_default_ini(args, ws_opt_x=False)  # a default does not replace
    run_utils.write_debug_args(args, tmp_path / "d" / "debug_args.json")
    again = run_utils.get_debug_args(tmp_path / "d" / "debug_args.json")
    assert again == args and again.debug_ini.frozen_content == {"ws_opt_x": True}
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="Invalid debug args file"):
        run_utils.get_debug_args(tmp_path / "bad.json")


def test_byte_units():
    assert convert_byte_unit(10, "B", src_unit="GiB") == 10 * 2**30
    assert convert_byte_unit(1500, "KB") == 1.5
    with pytest.raises(ValueError, match="Unknown byte unit"):
        convert_byte_unit(1, "B", src_unit="GiBs")


def test_compute_num_steps():
    loader = cstorch.utils.data.DataLoader(lambda: [torch.zeros(1)] * 7)
    steps = cstorch.utils.data.compute_num_steps
    assert steps(loader, num_epochs=2) == 14
    assert steps(loader, num_epochs=1, steps_per_epoch=1000, max_steps=20) == 20
    assert steps(loader, initial_step=15, max_steps=20, num_epochs=1) == 5
    assert steps(loader, num_steps=4, grad_accum_steps=2) == 8
    with pytest.raises(RuntimeError, match="Global step 20 already exceeds max step 20."):
        steps(loader, initial_step=20, max_steps=20)
    with pytest.raises(ValueError, match="One of num_steps"):
        steps(loader)


def test_distributed_on_a_client_and_modes():
    assert cstorch.distributed.is_master_ordinal() and not cstorch.distributed.is_streamer()
    assert cstorch.distributed.num_tasks() == 1
    assert cstorch.distributed.get_streaming_batch_size(8) == 8
    assert cstorch.core.modes.EVAL_ALL == "eval_all"
    assert cstorch.core.modes.TRAIN_AND_EVAL == "train_and_eval"


def test_metrics_amp_and_helpers():
    metric = cstorch.metrics.AccuracyMetric(name="acc_test")
    metric(labels=torch.tensor([1, 2, 3, 4]), predictions=torch.tensor([1, 2, 0, 0]))
    assert cstorch.metrics.compute_all_metrics()[metric.name] == 0.5
    assert cstorch.amp.set_half_dtype("bfloat16") is torch.bfloat16
    assert cstorch.amp.get_half_dtype() is torch.bfloat16
    assert cstorch.amp.set_half_dtype("cbfloat16") is torch.float16
    with pytest.raises(ValueError, match="Invalid half dtype"):
        cstorch.amp.set_half_dtype("float8")
    cstorch.amp.set_half_dtype("float16")
    found = list(cstorch.utils.nest.visit_torch_tensors({"a": [torch.ones(1), 3]},
                                                        scope=["input"]))
    assert [scope for scope, _ in found] == [["input", "a", 0]]
    assert cstorch.nn.functional.one_hot(torch.tensor([1], dtype=torch.int32), 3).tolist() == \
        [[0, 1, 0]]
    assert cstorch.to_numpy(cstorch.make_constant(torch.ones(2))).tolist() == [1.0, 1.0]


def test_optimizer_param_groups_and_schedule():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    groups = cstorch.optim.configure_param_groups(
        model, {"adjust_learning_rate": {"^1\\.": 0.5}})
    assert [g.get("adjust_learning_rate", 1.0) for g in groups] == [1.0, 0.5]
    optimizer = cstorch.optim.configure_optimizer("SGD", groups, learning_rate=[
        {"scheduler": "Linear", "initial_learning_rate": 0.1, "end_learning_rate": 0.0,
         "total_iters": 10}, {"scheduler": "Constant", "learning_rate": 0.02}], momentum=0.0)
    scheduler = cstorch.optim.configure_lr_scheduler(optimizer, [
        {"scheduler": "Linear", "initial_learning_rate": 0.1, "end_learning_rate": 0.0,
         "total_iters": 10}, {"scheduler": "Constant", "learning_rate": 0.02}])
    assert isinstance(scheduler, cstorch.optim.lr_scheduler.SequentialLR)
    rates = []
    for _ in range(12):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == pytest.approx(0.1) and rates[5] == pytest.approx(0.05)
    assert rates[11] == pytest.approx(0.02)
    assert optimizer.param_groups[1]["lr"] == pytest.approx(0.01)
    assert cstorch.optim.configure_lr_scheduler(optimizer, 0.1) is None
    with pytest.raises(ValueError, match="Unsupported learning rate scheduler"):
        cstorch.optim.configure_lr_scheduler(optimizer, {"scheduler": "Wiggly"})


def test_backend_device_and_checkpoint_version(tmp_path):
    backend = cstorch.backend("CPU", artifact_dir=str(tmp_path), mixed_precision=True)
    assert f"{backend.device}" == "CPU" and backend.backend_type.name == "CPU"
    with backend.device:
        model = torch.nn.Linear(2, 2)
    assert backend.is_cpu and not backend.is_gpu and backend.torch_device.type == "cpu"
    assert cstorch.backend.__module__  # the function, not the module
    cstorch.save({"model": model.state_dict()}, tmp_path / "c.mdl")
    version = cstorch.saver.PyTorchH5Saver.extract_version(tmp_path / "c.mdl")
    assert version.ckpt_version == 0.4
    (tmp_path / "x.mdl").write_text("not a checkpoint")
    assert cstorch.saver.PyTorchH5Saver.extract_version(tmp_path / "x.mdl") is None


def test_what_is_not_available_says_so():
    with pytest.raises(ValueError, match="not available in the emulated"):
        cstorch.experimental.listener.create_listener("norm")
    with pytest.raises(NotImplementedError, match="sparsity"):
        cstorch.sparse.configure_sparsity_optimizer("static", [])
