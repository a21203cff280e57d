"""samba.session.compile: trace a model on the host into a PEF and its logs.

compile   traces the model on the host, writes <output-folder>/<pef-name>/<pef-name>.pef
          and its logs, and takes the timing model's compile time (no RDU involved).
The PEF (a JSON document, see sambaflow._pef) records what loading it checks and what
running it costs: the graph's digest, the batch size, the tiles, the sections (fwd,
bckwd, opt) and the timing model's step times (see samba._run).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from aitestbed.sambanova import rdu
from aitestbed.sambanova import timing as rdu_timing

from .. import _graph, _pef
from .._errors import SambaError
from .._runtime import runtime
from .._version import __version__
from ._tensor import SambaTensor
from .directives import fusion_groups

TIMING_KEY = "aitestbed_timing"
BANNER = ("\n--------------------------------------------------\n"
          "Using patched version of torch.cat and torch.stack\n"
          "--------------------------------------------------\n")
CROSS_ENTROPY_WARNING = ('The dtype of "targets" to CrossEntropyLoss is torch.int64, however '
                         'only int16 is currently supported, implicit conversion will happen')


def last_args() -> dict[str, Any]:
    from .utils import argparser

    return dict(vars(argparser.last_args)) if argparser.last_args is not None else {}


def _flush() -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _workload(pef_metadata: dict[str, Any] | None, batch: int, tiles: int, inference: bool,
              parameters: int, forward_flops_per_sample: float) -> tuple[rdu_timing.Workload,
                                                                      dict[str, float]]:
    """The timing model's view of this PEF: the app's declaration, else the traced graph."""
    declared = dict((pef_metadata or {}).get(TIMING_KEY) or {})
    overrides = {key: float(declared.pop(key)) for key in ("compile_seconds", "step_seconds")
                 if key in declared}
    fields = {"kind": "generic", "batch_size": batch, "tiles": tiles, "inference": inference,
              "parameters": parameters, "flops_per_sample": forward_flops_per_sample}
    if declared.get("kind", "generic") != "generic":
        fields["parameters"] = 0
    unknown = sorted(set(declared) - set(rdu_timing.Workload.__dataclass_fields__))
    if unknown:
        raise SambaError(f"pef_metadata[{TIMING_KEY!r}]: unknown field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(rdu_timing.Workload.__dataclass_fields__)}, "
                         "compile_seconds, step_seconds")
    fields.update(declared)
    try:
        return rdu_timing.Workload(**fields), overrides
    except (TypeError, ValueError) as err:
        raise SambaError(f"pef_metadata[{TIMING_KEY!r}]: {err}") from None


def _optimizers(optimizer: Any) -> list[Any]:
    """The optimizers an app passes: one, a list or tuple of them (one per group), or None."""
    if optimizer is None:
        return []
    if isinstance(optimizer, list | tuple):
        return [o for o in optimizer if o is not None]
    return [optimizer]


def set_output_tensors(model: torch.nn.Module, outputs: tuple[Any, ...], name: str) -> None:
    """model.output_tensors: the traced outputs named after the PEF (at compile and at load)."""
    named = []
    for index, value in enumerate(outputs):
        if isinstance(value, torch.Tensor):
            value = value.detach().as_subclass(SambaTensor)
            value.sn_name = f"{name}__outputs__{index}"
            value.batch_dim = None
        named.append(value)
    object.__setattr__(model, "output_tensors", tuple(named))


class Compiler:
    """The compile half of SambaSession: model in, PEF out (no RDU, no session state)."""

    def compile(self, model: torch.nn.Module, inputs: Any, optimizer: Any = None,
                name: str | None = None, squeeze_bs_dim: bool = False,
                app_dir: str | None = None, config_dict: dict[str, Any] | None = None,
                pef_metadata: dict[str, Any] | None = None, **kwargs: Any) -> str:
        """Compile `model` for `inputs` into a PEF; return the PEF's path."""
        if not isinstance(model, torch.nn.Module):
            raise SambaError("session.compile takes a torch.nn.Module")
        inputs = _graph.as_tuple(inputs)
        config = {**last_args(), **(config_dict or {})}
        name = name or type(model).__name__.lower()
        pef_name = str(config.get("pef_name") or name)
        folder = str(config.get("output_folder") or "out")
        out_dir = Path(folder) / pef_name
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise SambaError(f"cannot create the output folder {out_dir}: {err}") from None
        absolute = out_dir.resolve()
        platform = runtime.platform()
        logs = {kind: f"{pef_name}.{kind}.log" for kind in ("samba", "mac")}
        shown = (lambda file: str(out_dir / file)) if platform.sn10 else \
            (lambda file: str(absolute / file))
        print(runtime.samba_line("Info", "SAMBA", f"Placing log files in {shown(logs['samba'])}"))
        print(runtime.samba_line("Info", "MAC", f"Placing log files in {shown(logs['mac'])}"))
        print(runtime.samba_line("Warning", "SAMBA", "").rstrip() + BANNER)

        inference = bool(config.get("inference"))
        traced = _graph.trace(model, inputs)
        if traced.cross_entropy_int64:
            print(runtime.samba_line("Warning", "SAMBA", CROSS_ENTROPY_WARNING))
        init_output_grads = bool(kwargs.get("init_output_grads"))
        loss_index = _graph.find_output_to_differentiate(traced.outputs) \
            if init_output_grads else traced.loss_index
        backward = not inference and loss_index is not None
        if not inference and _optimizers(optimizer) and loss_index is None:
            what = ("a floating tensor that depends on its parameters, whose gradient the "
                    "app sets" if init_output_grads else
                    "a scalar that depends on its parameters")
            raise SambaError("compile: the model is compiled for training (an optimizer was "
                             f"given) but none of its outputs is a loss ({what}); return the "
                             "loss, or compile with --inference")
        batch = _graph.batch_size(inputs) or int(config.get("batch_size") or 1)
        tiles = self._tiles_for(config, platform.tiles_per_rdu)
        parameters = _graph.parameter_count(model)
        workload, overrides = _workload(pef_metadata, batch, tiles, not backward, parameters,
                                        traced.forward_flops / max(1, batch))
        compile_seconds = overrides.get("compile_seconds", rdu_timing.compile_seconds(workload))
        step_seconds = overrides.get("step_seconds", rdu_timing.step_seconds(workload))
        forward_seconds = rdu_timing.step_seconds(workload.with_(inference=True))
        if "step_seconds" in overrides:
            forward_seconds = step_seconds * rdu_timing.INFERENCE_STEP_RATIO

        plasma_log = f"{absolute}//{pef_name}.plasma_compile.log"
        _flush()
        runtime.clock.advance(compile_seconds * 0.4)  # the MAC passes
        print(f"[info    ] [PLASMA] Launching plasma compilation! See log file: {plasma_log}")
        _flush()
        runtime.clock.advance(compile_seconds * 0.6)  # placement and routing
        sections = ["fwd"] + (["bckwd"] if backward else []) + \
            (["opt"] if backward and _optimizers(optimizer) else [])
        pef_path = absolute / f"{pef_name}.pef"
        outputs = traced.outputs
        pef = {
            "sambaflow_version": __version__,
            "name": pef_name,
            "app": os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else None,
            "app_dir": app_dir,
            "created": _dt.datetime.now().isoformat(timespec="seconds"),
            "platform": platform.name,
            "tiles_per_rdu": platform.tiles_per_rdu,
            "batch_size": batch,
            "squeeze_bs_dim": bool(squeeze_bs_dim),
            "tiles": tiles,
            "data_parallel": bool(config.get("data_parallel")),
            "world_size": int(config.get("world_size") or 1),
            "inference": inference,
            "backward": backward,
            "optimizer": ", ".join(type(o).__name__ for o in _optimizers(optimizer)) or None,
            "sections": sections,
            "loss_output": loss_index,
            "init_output_grads": init_output_grads,
            "parameters": parameters,
            "inputs": _graph.input_specs(inputs),
            "outputs": _graph.output_specs(outputs),
            "graph_digest": _graph.digest(model, inputs),
            "workload": asdict(workload),
            "compile_seconds": compile_seconds,
            "step_seconds": step_seconds,
            "forward_seconds": forward_seconds,
            "forward_flops": traced.forward_flops,
            "fusion": fusion_groups(model),
            "config": _jsonable(config),
            "metadata": _jsonable(pef_metadata or {}),
        }
        self._write_logs(absolute, pef_name, logs, pef, traced)
        try:
            _pef.write(pef_path, pef)
        except OSError as err:
            raise SambaError(f"cannot write the PEF {pef_path}: {err}") from None
        print(f"[info    ] PEF file {pef_path} created")
        print("[info] Compilation succeeded.")
        _flush()
        set_output_tensors(model, outputs, pef_name)
        return str(pef_path)

    @staticmethod
    def _tiles_for(config: dict[str, Any], tiles_per_rdu: int) -> int:
        try:
            chips = int(config.get("n_chips") or 1)
            tiles = int(config.get("num_tiles") or 4)
        except (TypeError, ValueError):
            raise SambaError("--n-chips and --num-tiles take whole numbers") from None
        if chips > 1:
            tiles = chips * tiles_per_rdu
        limit = rdu.RDUS_PER_NODE * tiles_per_rdu
        if not 1 <= tiles <= limit:
            raise SambaError(f"cannot compile for {tiles} tiles: a node has {limit} "
                             f"({rdu.RDUS_PER_NODE} RDUs of {tiles_per_rdu} tiles)")
        return tiles

    @staticmethod
    def _write_logs(folder: Path, name: str, logs: dict[str, str], pef: dict[str, Any],
                    traced: _graph.Trace) -> None:
        stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        samba = [f"{stamp} [Info][SAMBA] SambaFlow {__version__} (aitestbed emulation)",
                 f"{stamp} [Info][SAMBA] command: {' '.join(sys.argv)}",
                 f"{stamp} [Info][SAMBA] PEF name: {name}, batch size {pef['batch_size']}, "
                 f"{pef['tiles']} tiles, sections {', '.join(pef['sections'])}",
                 f"{stamp} [Info][SAMBA] model parameters: {pef['parameters']:,}"]
        samba += [f"{stamp} [Info][SAMBA] input {spec.get('index')}: {spec.get('name')} "
                  f"{spec.get('shape')} {spec.get('dtype')}" for spec in pef["inputs"]]
        samba += [f"{stamp} [Info][SAMBA] output {spec['index']}: {spec['shape']} {spec['dtype']}"
                  for spec in pef["outputs"]]
        samba.append(f"{stamp} [Info][SAMBA] config: {json.dumps(pef['config'], sort_keys=True)}")
        if traced.cross_entropy_int64:
            samba.append(f"{stamp} [Warning][SAMBA] {CROSS_ENTROPY_WARNING}")
        mac = [f"{stamp} [Info][MAC] lowering {len(traced.ops)} operators of {name}"]
        mac += [f"{stamp} [Info][MAC] op_fusion {group!r}: {count} module(s)"
                for group, count in pef.get("fusion", {}).items()]
        counts: dict[str, int] = {}
        for op, shape in traced.ops:
            index = counts.get(op, 0)
            counts[op] = index + 1
            mac.append(f"{stamp} [Info][MAC][GraphLoweringPass] {name}__{op}"
                       f"{'_' + str(index) if index else ''} -> {list(shape)}")
        if pef["backward"]:
            mac.append(f"{stamp} [Warning][MAC][MemoryOpTransformPass] Backward graph is trimmed "
                       "according to requires_grad to save computation.")
        seconds = pef["compile_seconds"]
        plasma = [f"{stamp} [info    ] [PLASMA] placing {name} on {pef['tiles']} tiles "
                  f"({pef['tiles_per_rdu']} per RDU, {pef['platform']})",
                  f"{stamp} [info    ] [PLASMA] sections: {', '.join(pef['sections'])}",
                  f"{stamp} [info    ] [PLASMA] compile time: {seconds:.1f} s",
                  f"{stamp} [info    ] PEF file {folder / (name + '.pef')} created"]
        files = {logs["samba"]: samba, logs["mac"]: mac, f"{name}.plasma_compile.log": plasma}
        for file, lines in files.items():
            try:
                (folder / file).write_text("\n".join(lines) + "\n")
            except OSError as err:
                raise SambaError(f"cannot write {folder / file}: {err}") from None
