"""The built model: run it on GroqChips (ONNX Runtime on the CPU, the program's fp16
weights), benchmark it (the timing model: the emulated chip's latency, not CPU time)."""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

import groqflow.common.build as build
import groqflow.common.exceptions as exp
import groqflow.common.printing as printing
from groqflow.common.tensors import to_numpy


@dataclass
class GroqEstimatedPerformance:
    pcie_input_latency: float
    compute_latency: float
    pcie_output_latency: float
    latency_units: str = "seconds"
    throughput_units: str = "inferences per second"

    @property
    def latency(self) -> float:
        return self.pcie_input_latency + self.compute_latency + self.pcie_output_latency

    @property
    def throughput(self) -> float:
        return 1.0 / self.latency


@dataclass
class GroqMeasuredPerformance:
    latency_file: str
    latency_units: str = "seconds"
    throughput_units: str = "inferences per second"

    @property
    def latency(self) -> float:
        return float(np.load(self.latency_file).item())

    @property
    def throughput(self) -> float:
        return 1.0 / self.latency


def _raise(err: exp.GroqFlowError):
    printing.log_error(str(err))
    raise err


class GroqModel:
    """A model groqit() built: `.run()` returns numpy arrays."""

    def __init__(self, state: build.GroqState, tensor_type=np.array):
        self.state = state
        self.tensor_type = tensor_type
        self.log_execute_path = state.path("log_execute.txt")
        self._session = None
        self._program: dict | None = None

    # --- user API -------------------------------------------------------------------------
    def run(self, inputs: dict) -> Any:
        self._validate_inputs(inputs, "run")
        results, _ = self._execute([inputs], repetitions=1)
        return self._unpack(results)

    def run_abunch(self, input_collection: Collection) -> Any:
        self._validate_input_collection(input_collection, "run_abunch")
        results, _ = self._execute(list(input_collection), repetitions=1)
        return self._unpack(results)

    def __call__(self, **inputs):
        return self.run(inputs)

    def estimate_performance(self) -> GroqEstimatedPerformance:
        cycles = build.load_yaml(self.state.stats_file)["total_cycles"]
        frequency, pcie_latency, pcie_bandwidth = 900000000, 1e-5, 24e9
        info = self.state.info
        info.estimated_pcie_input_latency = \
            info.compiled_model_input_bytes / pcie_bandwidth + pcie_latency
        info.deterministic_compute_latency = cycles / frequency
        info.estimated_pcie_output_latency = \
            info.compiled_model_output_bytes / pcie_bandwidth + pcie_latency
        if "--no-multichip-pipelining" not in self.state.config.compiler_flags:
            info.deterministic_compute_latency *= self.state.num_chips_used
        perf = GroqEstimatedPerformance(info.estimated_pcie_input_latency,
                                        info.deterministic_compute_latency,
                                        info.estimated_pcie_output_latency)
        info.estimated_latency, info.estimated_throughput = perf.latency, perf.throughput
        self.state.save()
        return perf

    def benchmark(self, inputs: dict | None = None,
                  repetitions: int = 100) -> GroqMeasuredPerformance:
        if inputs is None:
            printing.log_info("No inputs received for benchmark. Using the inputs provided "
                              "during model compilation.")
            inputs = np.load(self.state.original_inputs_file, allow_pickle=True).item()
        else:
            self._validate_inputs(inputs, "benchmark")
        _, perf = self._execute([inputs], repetitions=repetitions)
        self._record(perf)
        return perf

    def benchmark_abunch(self, input_collection: Collection,
                         repetitions: int = 1) -> GroqMeasuredPerformance:
        self._validate_input_collection(input_collection, "benchmark_abunch")
        _, perf = self._execute(list(input_collection), repetitions=repetitions)
        self._record(perf)
        return perf

    def groqview(self, port: int | None = None, block: bool = True):
        from groqflow.groqmodel.groqview import serve

        view = os.path.join(self.state.groqview_dir, "groqview.json")
        if not os.path.isfile(view):
            _raise(exp.GroqFlowError("GroqView directory not found. Please recompile your "
                                     "model with groqview=True"))
        return serve(view, port=port, block=block)

    def netron(self) -> None:
        _raise(exp.GroqFlowError("Netron installation not found."))

    # --- validation -------------------------------------------------------------------------
    def _validate_input_collection(self, input_collection, function_name: str) -> None:
        if input_collection is None:
            _raise(exp.ModelArgError(
                f"GroqModel.{function_name}() received an input_collection with type "
                f"{type(input_collection)}, however the input_collection arg must be a "
                "collection of dictionaries."))
        if len(input_collection) == 0:
            _raise(exp.ModelArgError(
                f"GroqModel.{function_name}() received an empty collection as input."))
        for inputs in input_collection:
            self._validate_inputs(inputs, function_name, True)

    def _validate_inputs(self, inputs, function_name: str, from_collection=False) -> None:
        collection = "input_collection " if from_collection else ""
        if not isinstance(inputs, dict):
            _raise(exp.ModelArgError(
                f"GroqModel.{function_name}() {collection}received inputs of type "
                f"{type(inputs)}, however the inputs must be a dictionary."))
        expected = self.state.expected_input_shapes or {}
        dtypes = self.state.expected_input_dtypes or {}
        if set(inputs) != set(expected):
            _raise(exp.ModelArgError(
                f"Model expected inputs {sorted(expected)} but received {sorted(inputs)}."))
        for key, value in inputs.items():
            arr = to_numpy(value)
            if list(arr.shape) != list(expected[key]):
                _raise(exp.ModelArgError(
                    f"Model compiled for input \"{key}\" with shape {tuple(expected[key])} "
                    f"but got {tuple(arr.shape)}. Please pad your inputs to the shape the "
                    "model was compiled for."))
            if np.dtype(arr.dtype).kind != np.dtype(dtypes[key]).kind:
                _raise(exp.ModelArgError(
                    f"Model compiled for input \"{key}\" with dtype {dtypes[key]} but got "
                    f"{arr.dtype}."))

    # --- execution --------------------------------------------------------------------------
    def _load_program(self) -> dict:
        if self._program is None:
            iops = sorted(glob.glob(os.path.join(self.state.compile_dir, "output*.iop")))
            if len(iops) != (self.state.num_chips_used or 1):
                _raise(exp.ModelRuntimeError(
                    f"Expected {self.state.num_chips_used} .iop file(s) in "
                    f"{self.state.compile_dir} but found {len(iops)}: build the model with "
                    "groqit() first (or copy its compile/*.iop files here)."))
            with open(iops[0], encoding="utf-8") as f:
                self._program = json.load(f)
        return self._program

    def _ort_session(self):
        if self._session is None:
            import onnxruntime as ort

            program = self._load_program()
            path = os.path.join(self.state.compile_dir, program["program"])
            options = ort.SessionOptions()
            options.log_severity_level = 3
            self._session = ort.InferenceSession(path, options,
                                                 providers=["CPUExecutionProvider"])
        return self._session

    def _execute(self, input_collection: list, repetitions: int):
        from aitestbed.groq import runtime

        n = self.state.num_chips_used or 1
        if n > build.MAX_EXECUTION_CHIPS:
            _raise(exp.Error(f"Groqit's num_chips_used was set to {n}, but the current "
                             "runtime only allows for up to 8 GroqChips."))
        program = self._load_program()
        samples = [{k: to_numpy(v) for k, v in inputs.items()} for inputs in input_collection]
        np.save(self.state.execution_inputs_file, np.array(samples, dtype=object),
                allow_pickle=True)
        for path in (self.state.outputs_file, self.state.latency_file):
            if os.path.isfile(path):
                os.remove(path)
        available = runtime.available_chips()
        if available < n:
            _raise(exp.ModelRuntimeError(
                f"Trying to execute a model compiled for {n} GroqChip processors but this "
                f"machine only has {available} GroqChip processors available."))
        with open(self.log_execute_path, "a", encoding="utf-8") as log:
            try:
                with runtime.open_chips(n) as chips:
                    if n > 1:
                        print("Bringup C2C topology...", file=log)
                    log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} running "
                              f"{len(samples)} input(s) x {repetitions} on GroqChip(s) "
                              f"{chips.cards} ({program['topology']})\n")
                    outputs = self._compute(samples)
            except runtime.ChipsUnavailable as err:
                log.write(f"{err}\n")
                _raise(exp.ModelRuntimeError(
                    "Failed while trying to run GroqChips locally. Refer to "
                    f"**{self.log_execute_path}** for details. ({err})"))
        np.save(self.state.outputs_file, np.array(outputs, dtype=object), allow_pickle=True)
        np.save(self.state.latency_file, np.array(program["end_to_end_latency_s"]))
        return self.state.outputs_file, GroqMeasuredPerformance(self.state.latency_file)

    def _compute(self, samples: list[dict]) -> list[dict]:
        """The chip's numerics: fp16 inputs and weights, fp32 accumulation, fp16 outputs."""
        session = self._ort_session()
        feeds_wanted = {i.name: i.type for i in session.get_inputs()}
        names = [o.name for o in session.get_outputs()]
        results = []
        for sample in samples:
            feed = {}
            for key, arr in sample.items():
                if key not in feeds_wanted:
                    continue  # an input the exported graph does not use
                if arr.dtype.kind == "f":
                    arr = arr.astype(np.float16).astype(np.float32)
                if feeds_wanted[key] == "tensor(int64)" and arr.dtype != np.int64:
                    arr = arr.astype(np.int64)
                feed[key] = arr
            values = session.run(names, feed)
            results.append({name: (v.astype(np.float16).astype(np.float32)
                                   if v.dtype.kind == "f" else v)
                            for name, v in zip(names, values, strict=False)})
        return results

    def _record(self, perf: GroqMeasuredPerformance) -> None:
        self.state.info.measured_latency = perf.latency
        self.state.info.measured_throughput = perf.throughput
        self.state.save()

    def _unpack(self, results_file: str) -> Any:
        results = np.load(results_file, allow_pickle=True)
        names = self.state.expected_output_names
        unpacked = []
        for sample in results:
            values = [self.tensor_type(sample[name]) for name in names]
            unpacked.append(values[0] if len(values) == 1 else tuple(values))
        return unpacked[0] if len(unpacked) == 1 else unpacked


class PytorchModelWrapper(GroqModel):
    """A PyTorch model built by groqit(): callable like the model, returns torch tensors."""

    def __init__(self, state: build.GroqState):
        import torch

        super().__init__(state, tensor_type=torch.tensor)

    def __call__(self, **kwargs):
        return self.run(kwargs)


def load_model(state: build.GroqState, model=None) -> GroqModel:
    if state.model_type == "pytorch":
        return PytorchModelWrapper(state)
    return GroqModel(state)


def load(build_name: str, cache_dir: str | None = None) -> GroqModel:
    state = build.load_state(cache_dir or build.default_cache_dir(), build_name)
    if state is None:
        _raise(exp.GroqFlowError(f"No build named {build_name} in the cache."))
    return load_model(state)
