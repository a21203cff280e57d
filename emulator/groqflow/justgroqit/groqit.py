"""groqit(): build a model for GroqChips (export, optimize, op check, fp16, compile, assemble)."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import groqflow.common.build as build
import groqflow.common.exceptions as exp
import groqflow.common.printing as printing
from groqflow.common.tensors import to_numpy
from groqflow.justgroqit import ops

RESERVED_COMPILER_FLAGS = ["--multichip", "--groqview", "--save-stats", "-o"]

# unique_name -> monitor text
STAGES = {
    "export_pytorch": "Exporting PyTorch to ONNX",
    "receive_onnx": "Receiving ONNX Model",
    "optimize_onnx": "Optimizing ONNX file",
    "check_compatibility": "Checking for Op support",
    "fp16_conversion": "Converting to FP16",
    "compile": "Compiling model",
    "assemble": "Assembling model",
}


# --- the monitor --------------------------------------------------------------------------
class _Spinner:
    CURSORS = ["   ", ".  ", ".. ", "..."]

    def __init__(self, msg: str, stream):
        self.msg, self.stream = msg, stream
        self.tty = printing._tty(stream)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        i = 0
        while not self._stop.wait(0.5):
            i += 1
            self.stream.write(f"      {self.msg}{self.CURSORS[i % 4]}\r")
            self.stream.flush()

    def start(self) -> None:
        if self.tty:
            self.stream.write(f"      {self.msg}   \r")
            self.stream.flush()
            self._thread.start()

    def finish(self, ok: bool) -> None:
        if self.tty:
            self._stop.set()
            self._thread.join()
        mark = printing.colour("✓", "green", self.stream) if ok else \
            printing.colour("×", "red", self.stream)
        self.stream.write(f"    {mark} {self.msg}   \n")
        self.stream.flush()


def _report(err: BaseException) -> None:
    printing.log_error(str(err))


# --- arguments -------------------------------------------------------------------------------
def _auto_build_name() -> str:
    package_dir = str(Path(__file__).resolve().parents[1])
    for frame in inspect.stack()[1:]:
        filename = frame.filename
        if filename.startswith("<") or str(Path(filename).resolve()).startswith(package_dir):
            continue
        return Path(filename).stem
    return "build"


def _validate_args(config: build.Config) -> None:
    name = config.build_name
    if config.num_chips is not None and config.num_chips != 1:
        chips = build.SUPPORTED_TOPOLOGIES.get(config.topology)
        if chips is None:
            raise exp.ArgError(
                f"Topology {config.topology} is not supported. Choose from: "
                f"{list(build.SUPPORTED_TOPOLOGIES)}.")
        if config.num_chips not in chips:
            raise exp.ArgError(
                f"You set groqit()'s num_chips argument to {config.num_chips} with topology "
                f"{config.topology} for build {name}, which is not a supported value. Choose "
                f"from the currently supported chip counts: {chips.keys()}.")
    if config.groqcard != build.GROQCARD_A14:
        raise exp.ArgError(
            f"You set groqit()'s groqcard argument to {config.groqcard} for build {name}, "
            f"which is not a supported value. Choose from the currently supported "
            f"GroqCards: ['{build.GROQCARD_A14}'].")
    if config.compiler_flags:
        if "--auto-asm" in config.compiler_flags and config.assembler_flags:
            raise exp.ArgError(
                "The --auto-asm compiler flag is mutually exclusive with the assembler_flags "
                "argument argument to groqit(). Either set assembler_flags=None or do not "
                "use --auto-asm.")
        for flag in config.compiler_flags:
            if any(flag.startswith(r) for r in RESERVED_COMPILER_FLAGS):
                raise exp.ArgError(
                    "The following compiler flags are reserved by groqit() and cannot be "
                    "used in the groqit(compiler_flags=...) argument: "
                    f"{RESERVED_COMPILER_FLAGS}. However, your compiler_flags argument "
                    f"includes {flag}.")
    if config.assembler_flags and config.num_chips != 1:
        raise exp.ArgError(
            "The assembler_flags argument is incompatible with multi-chip models. Either "
            "set num_chips=1 or do not use assembler_flags.")


# --- models and inputs ------------------------------------------------------------------------
def _model_type(model) -> str:
    if isinstance(model, str | Path):
        if str(model).endswith(".onnx"):
            return "onnx_file"
        raise exp.ArgError(f"groqit() received a model path {model} that is not an .onnx file.")
    try:
        import torch
        if isinstance(model, torch.jit.ScriptModule):
            return "torch_jit"
        if isinstance(model, torch.nn.Module):
            return "pytorch"
    except ImportError:
        pass
    module = type(model).__module__.split(".")[0]
    if module in ("keras", "tensorflow"):
        raise exp.ArgError("Keras models are not supported by this emulation of GroqFlow "
                           "(no TensorFlow here): export your model to ONNX and pass the "
                           ".onnx file to groqit().")
    if module in ("sklearn", "xgboost", "hummingbird"):
        raise exp.ArgError("scikit-learn/XGBoost models (Hummingbird) are not supported by "
                           "this emulation of GroqFlow.")
    raise exp.ArgError(f"groqit() received a model of type {type(model)}, which is not "
                       "supported: pass a torch.nn.Module or the path to an .onnx file.")


def _numpy_inputs(inputs: dict) -> dict[str, np.ndarray]:
    return {k: to_numpy(v) for k, v in inputs.items()}


def _model_hash(model, model_type: str) -> str:
    h = hashlib.sha256()
    if model_type == "onnx_file":
        h.update(Path(model).read_bytes())
    else:
        h.update(str(model).encode())
        for key, tensor in model.state_dict().items():
            h.update(key.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def compiled_bytes(dtype: str, shape) -> int:
    """Bytes of one tensor as the compiled model moves it: fp16 floats, int32 integers."""
    n = int(np.prod(shape)) if len(shape) else 1
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return 2 * n
    if dt.kind in "iu":
        return min(dt.itemsize, 4) * n
    return dt.itemsize * n


# --- stages ----------------------------------------------------------------------------------
def _export_pytorch(state: build.GroqState, model, inputs: dict) -> None:
    import torch

    opset = build.DEFAULT_ONNX_OPSET
    try:
        from torch.onnx._constants import ONNX_MAX_OPSET
    except ImportError:  # older torch
        ONNX_MAX_OPSET = 16  # noqa: N806
    if ONNX_MAX_OPSET < opset:
        state.info.torch_export_note = (f"torch {torch.__version__} exports ONNX opset "
                                        f"{ONNX_MAX_OPSET} at most; using it instead of 16")
        print(state.info.torch_export_note)
        opset = ONNX_MAX_OPSET
        state.config.onnx_opset = opset
    params = inspect.signature(model.forward).parameters
    names = [p for p in params if p in inputs] + [k for k in inputs if k not in params]
    kwargs = {k: inputs[k] if isinstance(inputs[k], torch.Tensor) else torch.as_tensor(inputs[k])
              for k in names}
    os.makedirs(os.path.dirname(state.base_onnx_file), exist_ok=True)
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, (kwargs,), state.base_onnx_file, input_names=names,
                          opset_version=opset, do_constant_folding=True)
    print(f"Exported {type(model).__name__} to {state.base_onnx_file} (opset {opset})")


def _receive_onnx(state: build.GroqState, model, inputs: dict) -> None:
    import onnx

    os.makedirs(os.path.dirname(state.base_onnx_file), exist_ok=True)
    m = onnx.load(str(model))
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < build.MINIMUM_ONNX_OPSET:
        raise exp.StageError(f"Unsupported opset {opset}: groqit() needs ONNX opset "
                             f">= {build.MINIMUM_ONNX_OPSET}.")
    onnx.save(m, state.base_onnx_file)
    print(f"Received {model} (opset {opset})")


def _optimize_onnx(state: build.GroqState, model, inputs: dict) -> None:
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = state.opt_onnx_file
    ort.InferenceSession(state.base_onnx_file, options, providers=["CPUExecutionProvider"])
    m = onnx.load(state.opt_onnx_file)
    onnx.checker.check_model(m)
    graph_inputs = {i.name for i in m.graph.input} - {i.name for i in m.graph.initializer}
    state.expected_output_names = [o.name for o in m.graph.output]
    print(f"Optimized ONNX file written to {state.opt_onnx_file}: "
          f"{len(m.graph.node)} nodes, inputs {sorted(graph_inputs)}")


def _check_compatibility(state: build.GroqState, model, inputs: dict) -> None:
    import onnx

    print("Checking unsupported ops...")
    m = onnx.load(state.opt_onnx_file)
    all_ops = sorted({n.op_type for n in m.graph.node})
    bad = ops.unsupported(all_ops)
    print("\t\tDONE")
    state.info.opt_onnx_ops = all_ops
    state.info.opt_onnx_unsupported_ops = bad
    state.info.opt_onnx_all_ops_supported = not bad
    print(f"\t{len(all_ops) - len(bad)}/{len(all_ops)} ops supported")
    if bad:
        print(f"\tUnsupported ops: {', '.join(bad)}")
    print(f"Model has {len(bad)} unsupported ops")
    if bad:
        raise exp.StageError(
            "You model contains ONNX operation(s) that are not supported by Groq Compiler:\n"
            f"**{', '.join(bad)}**\n"
            "Please replace these operation(s) in your model or contact\n"
            "sales@groq.com to request improved operation support in Groq Compiler.")


def _fp16_conversion(state: build.GroqState, model, inputs: dict) -> None:
    """Store every float32 weight as float16 (a Cast to float32 follows it): the program
    computes with fp16 weights and I/O, accumulating in fp32 as the GroqChip's MXM does."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(state.opt_onnx_file)
    graph = m.graph
    converted, new_inits, casts = 0, [], []
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            new_inits.append(init)
            continue
        half = numpy_helper.to_array(init).astype(np.float16)
        stored = numpy_helper.from_array(half, name=init.name + "_fp16")
        new_inits.append(stored)
        casts.append(helper.make_node("Cast", [stored.name], [init.name], to=onnx.TensorProto.FLOAT,
                                      name=f"{init.name}_upcast"))
        converted += 1
    del graph.initializer[:]
    graph.initializer.extend(new_inits)
    old_nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + old_nodes)
    graph_inputs = [i for i in graph.input if i.name not in {x.name for x in new_inits}]
    del graph.input[:]
    graph.input.extend(graph_inputs)
    onnx.checker.check_model(m)
    onnx.save(m, state.converted_onnx_file)
    state.downcast_applied = True
    print(f"Converted {converted} float32 initializers to float16: {state.converted_onnx_file}")


def _compile(state: build.GroqState, model, inputs: dict) -> None:
    import onnx
    from aitestbed.groq import timing

    config = state.config
    cmd = ["groq-compiler"]
    if state.num_chips_used and state.num_chips_used > 1:
        cmd += [f"--multichip={state.topology}", "--partition-mode=daisy-chain"]
    if config.groqview:
        cmd.append("--groqview")
    if not any(f.startswith("--effort=") for f in config.compiler_flags):
        cmd.append("--effort=standard")
    cmd.append(state.converted_onnx_file)
    cmd += list(dict.fromkeys(config.compiler_flags))
    cmd += ["--save-stats", state.stats_file, "-o", os.path.join(state.compile_dir, "output")]
    state.info.compiler_command = " ".join(shlex.quote(c) for c in cmd)
    print("Running Groq Compiler... ")
    print(state.info.compiler_command)

    m = onnx.load(state.opt_onnx_file)
    rows = timing.count_flops(m)
    work = timing.summarize(rows)
    largest = max((r["elements"] for r in rows), default=0)
    params = state.info.num_parameters or 0
    need = timing.sram_bytes_needed(params, largest)
    state.info.sram_bytes_needed = need
    n = state.num_chips_used or 1
    print(f"Max memory usage: {need} bytes of {n * timing.SRAM_BYTES_PER_CHIP} "
          f"({n} GroqChip processor(s), {timing.SRAM_BYTES_PER_CHIP} bytes of SRAM each)")
    state.info.compiler_ram_bytes = 200_000_000 + 40 * need
    if need > n * timing.SRAM_BYTES_PER_CHIP:
        print(f"error: the model needs {need} bytes of on-chip memory (fp16 weights and the "
              f"largest activation), more than {n} GroqChip processor(s) hold; set "
              f"groqit(num_chips=...) to at least {timing.chips_for_memory(need)}")
        print("Groq Compiler exited")
        state.info.compiler_success = False
        raise exp.StageError(
            "Attempted use Groq Compiler to compile your model's ONNX file into Groq Alan "
            "Assembly (.aa) files. However, this operation did not succeed. Please contact "
            "GroqFlow support to determine a path forwards. More information may be available "
            f"in the log file at **{state.path('log_compile.txt')}**")
    on_chip = timing.on_chip_latency(**work)
    cycles = timing.total_cycles(on_chip, n)
    os.makedirs(state.compile_dir, exist_ok=True)
    layers = [{**r, "cycles": round(timing.node_seconds(r) * timing.CLOCK_HZ)} for r in rows]
    stats = {"total_cycles": cycles, "num_chips": n, "on_chip_latency_s": on_chip,
             "work": work, "sram_bytes": need, "layers": layers}
    with open(state.stats_file, "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    per_chip = [layers[i::n] for i in range(n)] if n > 1 else [layers]
    for chip, chip_layers in enumerate(per_chip):
        name = "output.aa" if n == 1 else f"output.{chip}.aa"
        with open(os.path.join(state.compile_dir, name), "w", encoding="utf-8") as f:
            f.write(f"; Alan Assembly (aitestbed emulation) for {config.build_name}, "
                    f"chip {chip} of {n}\n; total_cycles {cycles}\n")
            for layer in chip_layers:
                f.write(f"{layer['op']:<20} {layer['name']:<48} cycles={layer['cycles']} "
                        f"flops={layer['flops']}\n")
    if config.groqview:
        os.makedirs(state.groqview_dir, exist_ok=True)
        with open(os.path.join(state.groqview_dir, "groqview.json"), "w",
                  encoding="utf-8") as f:
            json.dump({"build_name": config.build_name, "total_cycles": cycles,
                       "num_chips": n, "clock_hz": timing.CLOCK_HZ, "layers": layers}, f)
    state.info.compiler_success = True
    print("Groq Compiler exited")
    if "--auto-asm" in config.compiler_flags:
        _write_iops(state)


def _write_iops(state: build.GroqState) -> None:
    import onnx
    from aitestbed.groq import timing

    stats = build.load_yaml(state.stats_file)
    m = onnx.load(state.opt_onnx_file)
    out_bytes = 0
    for o in m.graph.output:
        t = o.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        out_bytes += compiled_bytes(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), shape)
    in_bytes = sum(compiled_bytes(dt, state.expected_input_shapes[k])
                   for k, dt in state.expected_input_dtypes.items())
    state.info.compiled_model_input_bytes = in_bytes
    state.info.compiled_model_output_bytes = out_bytes
    n = state.num_chips_used or 1
    program = {
        "format": "aitestbed-groq-iop/1", "build_name": state.config.build_name,
        "program": os.path.relpath(state.converted_onnx_file, state.compile_dir),
        "num_chips": n, "topology": state.topology, "total_cycles": stats["total_cycles"],
        "on_chip_latency_s": stats["on_chip_latency_s"],
        "end_to_end_latency_s": timing.end_to_end_latency(stats["on_chip_latency_s"],
                                                          in_bytes, out_bytes),
        "input_bytes": in_bytes, "output_bytes": out_bytes,
        "inputs": {k: {"shape": v, "dtype": state.expected_input_dtypes[k]}
                   for k, v in state.expected_input_shapes.items()},
        "outputs": state.expected_output_names,
    }
    names = ["output.iop"] if n == 1 else [f"output.{i}.iop" for i in range(n)]
    for i, name in enumerate(names):
        with open(os.path.join(state.compile_dir, name), "w", encoding="utf-8") as f:
            json.dump({**program, "chip": i}, f, indent=1)


def _assemble(state: build.GroqState, model, inputs: dict) -> None:
    n = state.num_chips_used or 1
    if n == 1:
        cmd = ["aa-latest", os.path.join(state.compile_dir, "output.aa"), "--output-iop",
               os.path.join(state.compile_dir, "output.iop"),
               *(state.config.assembler_flags or build.DEFAULT_ASSEMBLER_FLAGS)]
    else:
        cmd = ["python", "groqflow/justgroqit/assemble_multichip.py", "-t", state.topology,
               "-d", state.compile_dir]
    state.info.assembler_command = " ".join(cmd)
    print("Running Groq Assembler")
    print(state.info.assembler_command)
    _write_iops(state)
    state.info.assembler_success = True
    print("Groq Assembler has exited")


STAGE_FUNCS: dict[str, Callable] = {
    "export_pytorch": _export_pytorch, "receive_onnx": _receive_onnx,
    "optimize_onnx": _optimize_onnx, "check_compatibility": _check_compatibility,
    "fp16_conversion": _fp16_conversion, "compile": _compile, "assemble": _assemble,
}


def _sequence(model_type: str, config: build.Config) -> list[str]:
    if config.sequence:
        unknown = [s for s in config.sequence if s not in STAGE_FUNCS]
        if unknown:
            raise exp.ArgError(f"groqit(sequence=...) names unknown stages {unknown}; "
                               f"choose from {list(STAGE_FUNCS)}.")
        return list(config.sequence)
    first = "receive_onnx" if model_type == "onnx_file" else "export_pytorch"
    seq = [first, "optimize_onnx", "check_compatibility", "fp16_conversion", "compile"]
    if "--auto-asm" not in config.compiler_flags:
        seq.append("assemble")
    return seq


def _run_stage(state: build.GroqState, name: str, model, inputs: dict) -> None:
    msg = STAGES[name]
    spinner = _Spinner(msg, sys.stdout) if state.monitor else None
    if spinner:
        spinner.start()
    state.info.current_build_stage = name
    state.save()
    start = time.perf_counter()
    log_path = state.path(f"log_{name}.txt")
    try:
        with open(log_path, "w", encoding="utf-8") as log, \
                contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            STAGE_FUNCS[name](state, model, inputs)
    except Exception as err:
        if spinner:
            spinner.finish(False)
        state.build_status = "failed_build"
        state.info.current_build_stage = None
        state.save()
        if not isinstance(err, exp.GroqFlowError):
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"\n{type(err).__name__}: {err}\n")
            err = exp.StageError(f"Stage {name} failed: {type(err).__name__}: {err}. More "
                                 f"information may be available in the log file at "
                                 f"**{log_path}**")
        _report(err)
        raise err from None
    if spinner:
        spinner.finish(True)
    state.info.build_stage_execution_times[name] = time.perf_counter() - start
    state.info.completed_build_stages.append(name)
    state.info.current_build_stage = None
    state.save()


# --- the cache --------------------------------------------------------------------------------
def _fmt_shapes(shapes: dict | None) -> str:
    return str({k: tuple(v) for k, v in (shapes or {}).items()})


def _rebuild_reasons(old: build.GroqState, new: build.GroqState) -> list[str]:
    name = new.config.build_name
    reasons = []
    if old.groqflow_version.split(".")[:2] != new.groqflow_version.split(".")[:2]:
        reasons.append(f"GroqFlow version changed from {old.groqflow_version} to "
                       f"{new.groqflow_version} (major or minor) since the last time the "
                       "model was built.")
    if old.model_hash != new.model_hash:
        reasons.append(f'Model "{name}" changed since the last time it was built.')
    if old.expected_input_shapes != new.expected_input_shapes:
        reasons.append(f'Input shape of model "{name}" changed from '
                       f"{_fmt_shapes(old.expected_input_shapes)} to "
                       f"{_fmt_shapes(new.expected_input_shapes)} since the last time it "
                       "was built.")
    if old.expected_input_dtypes != new.expected_input_dtypes:
        reasons.append(f'Input data type of model "{name}" changed from '
                       f"{old.expected_input_dtypes} to {new.expected_input_dtypes} since the "
                       "last time it was built.")
    for key in ("compiler_flags", "assembler_flags", "groqview", "num_chips", "topology",
                "sequence", "groqcard"):
        a, b = getattr(old.config, key), getattr(new.config, key)
        if a != b:
            reasons.append(f'build_model() argument "{key}" for build "{name}" changed from '
                           f"{a} to {b} since the last time it was built.")
    if not reasons and old.build_status != "successful_build":
        reasons.append(
            "build_model() has detected that you already attempted building this model with "
            "the exact same model, inputs, options, and version of onnxflow, and that build "
            "failed.")
    return reasons


# --- groqit ------------------------------------------------------------------------------------
def groqit(model: Any = None, inputs: dict | None = None, build_name: str | None = None,
           cache_dir: str | None = None, monitor: bool = True, rebuild: str | None = None,
           compiler_flags: list[str] | None = None, assembler_flags: list[str] | None = None,
           num_chips: int | None = None, topology: str = build.TOPOLOGY, groqview: bool = False,
           sequence: list[str] | None = None, quantization_samples: Any = None):
    """Build `model` (torch.nn.Module or .onnx path) for GroqChips; returns a GroqModel."""
    from groqflow.groqmodel.groqmodel import load_model

    try:
        if rebuild is None:
            rebuild = build.rebuild_policy_from_env()
        elif rebuild not in build.REBUILD_OPTIONS:
            raise exp.ArgError(f"groqit() received rebuild={rebuild!r}, which is not one of "
                               f"the allowed values: {build.REBUILD_OPTIONS}.")
        if quantization_samples is not None:
            raise exp.ArgError("groqit(quantization_samples=...) (post-training int8 "
                               "quantization) is not supported by this emulation of GroqFlow.")
        if inputs is None or not isinstance(inputs, dict):
            raise exp.ArgError(f"groqit() received inputs of type {type(inputs)}, however the "
                               "inputs must be a dictionary of the model's forward() arguments.")
        auto_name = build_name is None
        name = _auto_build_name() if auto_name else build_name
        config = build.Config(build_name=name, auto_name=auto_name,
                              compiler_flags=list(compiler_flags or []),
                              assembler_flags=list(assembler_flags or []),
                              groqview=bool(groqview), num_chips=num_chips, topology=topology,
                              sequence=list(sequence) if sequence else None)
        _validate_args(config)
        model_type = _model_type(model)
        if model_type == "torch_jit":
            raise exp.ArgError("TorchScript models need groq-torch-importer, which this "
                               "emulation does not have: pass the torch.nn.Module instead.")
    except exp.GroqFlowError as err:
        _report(err)
        raise

    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or build.default_cache_dir()))
    np_inputs = _numpy_inputs(inputs)
    state = build.GroqState(config=config, cache_dir=cache_dir, monitor=monitor,
                            rebuild=rebuild, model_type=model_type,
                            model_hash=_model_hash(model, model_type))
    state.expected_input_shapes = {k: list(v.shape) for k, v in np_inputs.items()}
    state.expected_input_dtypes = {k: str(v.dtype) for k, v in np_inputs.items()}
    state.quantization_samples = False

    old = build.load_state(cache_dir, name)
    auto = " (build_name auto-selected)" if auto_name else ""
    if old is not None and rebuild != "always":
        reasons = _rebuild_reasons(old, state)
        if not reasons or (rebuild == "never" and old.build_status == "successful_build"):
            if monitor:
                printing.log_success(f'Build "{name}"{auto} found in cache. Loading it!')
            return load_model(old, model)
        if monitor:
            listed = "".join(f"\n - {r}" for r in reasons)
            printing.log_warning(
                f"build_model() discovered a cached build of {name}, but decided to rebuild "
                f"for the following reasons: {listed}\n"
                "build_model() will now rebuild your model to ensure correctness. You can "
                "change this policy by setting the build_model(rebuild=...) argument.")

    import shutil
    shutil.rmtree(state.build_dir, ignore_errors=True)
    os.makedirs(state.build_dir)
    np.save(state.original_inputs_file, np_inputs, allow_pickle=True)
    if model_type == "pytorch":
        state.info.num_parameters = int(sum(p.numel() for p in model.parameters()))
    else:
        import onnx
        m = onnx.load(str(model))
        state.info.num_parameters = int(sum(int(np.prod(i.dims)) for i in m.graph.initializer))
    state.num_chips_used = num_chips if num_chips is not None else \
        build.calculate_num_chips(state.info.num_parameters)
    try:
        max_chips = max(build.SUPPORTED_TOPOLOGIES[topology])
        if state.num_chips_used > max_chips:
            raise exp.StageError(
                f"groqit() automatically decided that {state.num_chips_used} GroqChip "
                f'processors are needed to build model "{name}. chips supported by groqit at '
                f"this time ({max_chips}).")
        if state.num_chips_used > 1 and state.num_chips_used not in \
                build.SUPPORTED_TOPOLOGIES[topology]:
            state.num_chips_used = min(n for n in build.SUPPORTED_TOPOLOGIES[topology]
                                       if n >= state.num_chips_used)
    except exp.GroqFlowError as err:
        state.build_status = "failed_build"
        state.save()
        _report(err)
        raise
    state.info.all_build_stages = _sequence(model_type, config)
    state.build_status = "build_running"
    state.uid = hashlib.sha1(f"{name}{time.time()}".encode()).hexdigest()[:12]
    state.save()

    if monitor:
        print("\n\n")
        print(f'{printing.colour(f"Building {chr(34)}{name}{chr(34)}", "bold")}')
    for stage in state.info.all_build_stages:
        _run_stage(state, stage, model, inputs)
    state.build_status = "successful_build"
    state.save()
    if monitor:
        print()
        printing.log_success(f"Saved to {build.tilde(state.build_dir)}")
    return load_model(state, model)


