"""Build configuration, the cache directory and the build's state (`<name>_state.yaml`)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from groqflow.version import __version__

DEFAULT_CACHE_DIR = os.environ.get("GROQFLOW_CACHE_DIR",
                                   os.path.join(os.path.expanduser("~"), ".cache", "groqflow"))
DRAGONFLY = "Dragonfly"
ROTATIONAL = "Rotational"
TOPOLOGY = DRAGONFLY
GROQCARD_A14 = "A1.4"
GROQCARD = GROQCARD_A14
DEFAULT_ONNX_OPSET = 16
MINIMUM_ONNX_OPSET = 11
DEFAULT_COMPILER_FLAGS: list[str] = []
DEFAULT_ASSEMBLER_FLAGS = ["--ifetch-from-self", "--ifetch-slice-ordering=round-robin"]
REBUILD_OPTIONS = ["if_needed", "always", "never"]
MAX_EXECUTION_CHIPS = 8
PARAMS_PER_CHIP = 50_000_000

DRAGONFLY_TOPOLOGIES = {n: f"DF_A14_{n}_CHIP" for n in (2, 4, 8, 16, 32, 64)}
ROTATIONAL_TOPOLOGIES = {n: f"RT09_A14_{n}_CHIP" for n in (16, 32, 40, 48, 56, 64, 72)}
SUPPORTED_TOPOLOGIES = {DRAGONFLY: DRAGONFLY_TOPOLOGIES, ROTATIONAL: ROTATIONAL_TOPOLOGIES}

UNKNOWN = "unknown"


def default_cache_dir() -> str:
    return os.environ.get("GROQFLOW_CACHE_DIR", DEFAULT_CACHE_DIR)


def rebuild_policy_from_env() -> str:
    value = os.environ.get("GROQIT_REBUILD_POLICY")
    if value is None:
        return "if_needed"
    if value not in REBUILD_OPTIONS:
        raise ValueError(
            f"Environment variable set for GROQIT_REBUILD_POLICY has value {value} which is "
            f"not one of the following allowed values: {REBUILD_OPTIONS}")
    return value


def calculate_num_chips(num_parameters: int) -> int:
    """The power of two above num_parameters / 50 M (1 for a model without parameters)."""
    if num_parameters <= 0:
        return 1
    blocks = -(-int(num_parameters) // PARAMS_PER_CHIP)
    return 2 ** (blocks - 1).bit_length()


def output_dir(cache_dir: str, build_name: str) -> str:
    return os.path.join(cache_dir, build_name)


def tilde(path: str | Path) -> str:
    home = os.path.expanduser("~")
    path = str(path)
    return "~" + path[len(home):] if home != "/" and path.startswith(home) else path


@dataclass
class Config:
    build_name: str
    auto_name: bool
    compiler_flags: list[str] = field(default_factory=list)
    assembler_flags: list[str] = field(default_factory=list)
    groqview: bool = False
    groqcard: str = GROQCARD
    num_chips: int | None = None
    topology: str = TOPOLOGY
    sequence: list[str] | None = None
    onnx_opset: int = DEFAULT_ONNX_OPSET


@dataclass
class Info:
    backend: str = "local"
    num_parameters: int | None = None
    opt_onnx_ops: list[str] = field(default_factory=list)
    opt_onnx_unsupported_ops: list[str] = field(default_factory=list)
    opt_onnx_all_ops_supported: bool | None = None
    torch_export_note: str | None = None
    compiler_command: str | None = None
    compiler_success: bool | None = None
    assembler_command: str | None = None
    assembler_success: bool | None = None
    compiled_model_input_bytes: int | None = None
    compiled_model_output_bytes: int | None = None
    compiler_ram_bytes: int | None = None
    sram_bytes_needed: int | None = None
    measured_latency: float | None = None
    measured_throughput: float | None = None
    estimated_pcie_input_latency: float | None = None
    deterministic_compute_latency: float | None = None
    estimated_pcie_output_latency: float | None = None
    estimated_latency: float | None = None
    estimated_throughput: float | None = None
    all_build_stages: list[str] = field(default_factory=list)
    completed_build_stages: list[str] = field(default_factory=list)
    current_build_stage: str | None = None
    build_stage_execution_times: dict[str, float] = field(default_factory=dict)
    skipped_stages: int = 0


@dataclass
class GroqState:
    config: Config
    cache_dir: str
    monitor: bool = True
    rebuild: str = "if_needed"
    model_type: str = UNKNOWN
    model_hash: str | None = None
    uid: str | None = None
    build_status: str = "not_started"
    downcast_applied: bool = False
    expected_input_shapes: dict[str, list[int]] | None = None
    expected_input_dtypes: dict[str, str] | None = None
    expected_output_names: list[str] | None = None
    groqflow_version: str = __version__
    onnxflow_version: str = "3.3.1"
    info: Info = field(default_factory=Info)
    intermediate_results: list[str] = field(default_factory=list)
    num_chips_used: int | None = None
    quantization_samples: bool = False
    use_sdk: bool = True

    # --- files -------------------------------------------------------------------------
    @property
    def build_dir(self) -> str:
        return output_dir(self.cache_dir, self.config.build_name)

    def path(self, *parts: str) -> str:
        return os.path.join(self.build_dir, *parts)

    @property
    def state_file(self) -> str:
        return self.path(f"{self.config.build_name}_state.yaml")

    @property
    def original_inputs_file(self) -> str:
        return self.path("inputs_original.npy")

    @property
    def execution_inputs_file(self) -> str:
        return self.path("inputs.npy")

    @property
    def outputs_file(self) -> str:
        return self.path("outputs.npy")

    @property
    def latency_file(self) -> str:
        return self.path("latency.npy")

    @property
    def compile_dir(self) -> str:
        return self.path("compile")

    @property
    def stats_file(self) -> str:
        return self.path("compile", "stats.json")

    @property
    def groqview_dir(self) -> str:
        return self.path("compile", "output_bind")

    @property
    def topology(self) -> str:
        n = self.num_chips_used or 1
        if n == 1:
            return "single_chip"
        return SUPPORTED_TOPOLOGIES[self.config.topology].get(n, f"{n}_chips")

    def onnx_file(self, suffix: str) -> str:
        return self.path("onnx", f"{self.config.build_name}-op{self.config.onnx_opset}-"
                                 f"{suffix}.onnx")

    @property
    def base_onnx_file(self) -> str:
        return self.onnx_file("base")

    @property
    def opt_onnx_file(self) -> str:
        return self.onnx_file("opt")

    @property
    def converted_onnx_file(self) -> str:
        return self.onnx_file("opt-f16")

    # --- persistence ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self) -> None:
        os.makedirs(self.build_dir, exist_ok=True)
        tmp = self.state_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            yaml.dump(_plain(self.to_dict()), f, sort_keys=True)
        os.replace(tmp, self.state_file)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroqState:
        data = dict(data)
        config = Config(**{k: v for k, v in data.pop("config").items()
                           if k in Config.__dataclass_fields__})
        info = Info(**{k: v for k, v in (data.pop("info", None) or {}).items()
                       if k in Info.__dataclass_fields__})
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(config=config, info=info, **known)


def _plain(value: Any) -> Any:
    """Only plain YAML types in the state file (numpy scalars become numbers)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def load_state(cache_dir: str, build_name: str) -> GroqState | None:
    path = os.path.join(output_dir(cache_dir, build_name), f"{build_name}_state.yaml")
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return GroqState.from_dict(yaml.safe_load(f))
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return None


def load_yaml(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)
