"""How long a model takes on a GroqChip: the emulator's timing model (pure functions).

    count_flops(onnx_model)      per-node work from the ONNX graph (after shape inference):
                                 2*MACs of MatMul/Gemm-type and of Conv-type nodes, and the
                                 output elements of every other node
    on_chip_latency(work)        seconds of deterministic compute on the chip(s):
                                 FIXED_S + matmul/MATMUL_FLOPS + conv/CONV_FLOPS + other/VECTOR
    pcie_latency(nbytes)         one PCIe transfer: nbytes/24e9 + 1e-5 (GroqFlow's own estimate)
    end_to_end_latency(...)      on-chip + PCIe in + PCIe out + host overhead (what
                                 GroqModel.benchmark() measures on a real node)
    total_cycles(seconds, n)     the cycle count the "compiler" writes to stats.json
    sram_bytes_needed(...)       fp16 weights + the largest activation, against 230 MB per chip

Calibration (reference/groq.md §4.2, the proof points' tables from the ALCF GroqRack). The
work was counted by count_flops() on full-size ONNX graphs (opset 16) of the three models;
the I/O bytes are the compiled model's (fp16 floats, int32 integers, 1-byte bools):

    model (inputs)             MatMul FLOP Conv FLOP vector elems in/out bytes docs on-chip/e2e
    BERT-tiny (1x128 tokens)     0.1175 G    0         1.66 M    1024 / 4      0.0266/0.0517 ms
    MiniLM-L6-v2 (2x128 tokens)  5.7378 G    0        31.96 M    2304 / 196608 0.3816/0.4662 ms
    ResNet50 (1x3x224x224)       0.0041 G  8.1743 G   15.33 M  301056 / 2000   0.3350/0.3976 ms

On chip: three constants (fixed cost 19.1 us, MatMul 15.97 TFLOPS, Conv 26.0 TFLOPS
effective of the 188 TFLOPS FP16 peak) are solved from the three on-chip figures, with the
vector rate set to 1e13 elements/s (a small term for all three); end to end: the host
overhead (5.0 us fixed, inputs at 12.3 GB/s, outputs at 3.84 GB/s) is solved from the three
end-to-end figures after GroqFlow's PCIe estimate. Both reproduce the documented figures to
rounding (<0.1 %, tests/unit/test_groqflow.py checks 10 %). Six constants from six
numbers: there is no further documented point to validate against, so other models
are extrapolations (a least-squares fit with one host-bandwidth constant instead missed
BERT-tiny end to end by 15 %, hence the separate input and output rates).
"""

from __future__ import annotations

import math

CLOCK_HZ = 900e6
SRAM_BYTES_PER_CHIP = 230_000_000
PCIE_BYTES_PER_S = 24e9
PCIE_FIXED_S = 1e-5

# --- fitted (see the module docstring) -------------------------------------------------------
FIXED_S = 1.90901e-05        # per-inference fixed cost on chip (program start, sync)
MATMUL_FLOPS = 15.96903e12     # effective FP16 rate on MatMul/Gemm (of 188 TFLOPS peak)
CONV_FLOPS = 26.02577e12       # effective FP16 rate on Conv
VECTOR_ELEMS = 1.0e13         # elementwise/reduction outputs per second (vector units)
HOST_FIXED_S = 4.99744e-06     # host runtime per inference (end-to-end only)
HOST_IN_BYTES_PER_S = 12.29708e9   # host-side copy and fp16 conversion of the inputs
HOST_OUT_BYTES_PER_S = 3.842926e9  # unpacking the outputs back to the host's dtypes

MATMUL_OPS = {"MatMul", "Gemm", "MatMulInteger", "Einsum", "QLinearMatMul"}
CONV_OPS = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"}
FREE_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape", "Constant",
            "Cast", "Transpose", "Concat", "Slice", "Split", "Gather", "Dropout",
            "ConstantOfShape", "Expand"}


def _shape_of(value_info) -> list[int] | None:
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = []
    for dim in tensor.shape.dim:
        if not dim.HasField("dim_value"):
            return None
        dims.append(int(dim.dim_value))
    return dims


def _numel(shape: list[int] | None) -> int:
    return math.prod(shape) if shape is not None else 0


def count_flops(model) -> list[dict]:
    """Per node: {"name", "op", "kind" (matmul|conv|vector|free), "flops", "elements"}.

    `model` is an onnx.ModelProto; shapes come from onnx.shape_inference, so every shape
    must be static (groqit's inputs fix them)."""
    import onnx  # only here: the room itself needs no onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes: dict[str, list[int] | None] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shapes[vi.name] = _shape_of(vi)
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    rows = []
    for i, node in enumerate(graph.node):
        out = shapes.get(node.output[0]) if node.output else None
        elements = _numel(out)
        flops = 0
        if node.op_type in MATMUL_OPS and node.op_type != "Einsum":
            a = shapes.get(node.input[0])
            transa = any(at.name == "transA" and at.i for at in node.attribute)
            k = (a[-2] if transa else a[-1]) if a else 0
            flops, kind = 2 * elements * k, "matmul"
        elif node.op_type in CONV_OPS:
            w = shapes.get(node.input[1])
            per_out = _numel(w[1:]) if w else 0  # Cin/group * kernel
            if node.op_type == "ConvTranspose" and w:
                x = shapes.get(node.input[0])
                flops, kind = 2 * _numel(x) * w[1] * _numel(w[2:]), "conv"
            else:
                flops, kind = 2 * elements * per_out, "conv"
        elif node.op_type in FREE_OPS:
            kind = "free"
        else:
            kind = "vector"
        rows.append({"name": node.name or f"{node.op_type}_{i}", "op": node.op_type,
                     "kind": kind, "flops": int(flops), "elements": int(elements)})
    return rows


def summarize(rows: list[dict]) -> dict:
    """Totals by kind: {"matmul": FLOP, "conv": FLOP, "vector": elements}."""
    return {"matmul": sum(r["flops"] for r in rows if r["kind"] == "matmul"),
            "conv": sum(r["flops"] for r in rows if r["kind"] == "conv"),
            "vector": sum(r["elements"] for r in rows if r["kind"] == "vector")}


def node_seconds(row: dict) -> float:
    """One node's share of the on-chip time (without the fixed overhead)."""
    if row["kind"] == "matmul":
        return row["flops"] / MATMUL_FLOPS
    if row["kind"] == "conv":
        return row["flops"] / CONV_FLOPS
    if row["kind"] == "vector":
        return row["elements"] / VECTOR_ELEMS
    return 0.0


def on_chip_latency(matmul: float = 0, conv: float = 0, vector: float = 0) -> float:
    """Seconds of deterministic compute for one inference of the whole model."""
    return FIXED_S + matmul / MATMUL_FLOPS + conv / CONV_FLOPS + vector / VECTOR_ELEMS


def pcie_latency(nbytes: int) -> float:
    return nbytes / PCIE_BYTES_PER_S + PCIE_FIXED_S


def host_overhead(input_bytes: int, output_bytes: int) -> float:
    return (HOST_FIXED_S + input_bytes / HOST_IN_BYTES_PER_S
            + output_bytes / HOST_OUT_BYTES_PER_S)


def end_to_end_latency(on_chip_s: float, input_bytes: int, output_bytes: int) -> float:
    """What a benchmark on a GroqNode measures per inference, in seconds."""
    return (on_chip_s + pcie_latency(input_bytes) + pcie_latency(output_bytes)
            + host_overhead(input_bytes, output_bytes))


def total_cycles(on_chip_s: float, num_chips: int = 1) -> int:
    """Cycles of one pipeline stage: GroqFlow multiplies by num_chips to get the latency."""
    return max(1, round(on_chip_s * CLOCK_HZ / max(1, num_chips)))


def sram_bytes_needed(num_parameters: int, largest_activation_elements: int = 0) -> int:
    """On-chip memory a model needs: fp16 weights plus its largest fp16 activation."""
    return 2 * int(num_parameters) + 2 * int(largest_activation_elements)


def chips_for_memory(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / SRAM_BYTES_PER_CHIP))


# The proof points the constants are fitted to (work counted by count_flops, bytes are the
# compiled model's fp16 I/O as GroqFlow counts them) and the documented latencies (seconds).
CALIBRATION = {
    "bert_tiny": {"matmul": 117_473_792, "conv": 0, "vector": 1_657_728,
                  "input_bytes": 1024, "output_bytes": 4,
                  "on_chip": 1 / 37576.72, "end_to_end": 1 / 19328.60},
    "minilmv2": {"matmul": 5_737_807_872, "conv": 0, "vector": 31_962_624,
                 "input_bytes": 2304, "output_bytes": 196_608,
                 "on_chip": 1 / 2620.58, "end_to_end": 1 / 2144.87},
    "resnet50": {"matmul": 4_096_000, "conv": 8_174_272_512, "vector": 15_330_816,
                 "input_bytes": 301_056, "output_bytes": 2_000,
                 "on_chip": 1 / 2985.40, "end_to_end": 1 / 2515.15},
}
