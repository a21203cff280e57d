"""The ONNX operations the emulated Groq Compiler accepts (what `onnxmodelanalyzer -u` checks).

Ours, not Groq's list: the common operators of CNNs, transformers and MLPs. Data-dependent
shapes and control flow (NonZero, Unique, Loop, If, Scan...), linear algebra beyond matrix
products (Det, ...), random numbers and sequences are not supported, as on a chip whose
program is scheduled entirely at compile time.
"""

SUPPORTED_OPS = frozenset({
    # arithmetic and elementwise
    "Abs", "Add", "And", "Ceil", "Clip", "Cos", "Div", "Equal", "Erf", "Exp", "Floor",
    "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mod",
    "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "Round", "Sign", "Sin", "Sqrt", "Sub",
    "Sum", "Tanh", "Where", "Xor", "IsNaN", "IsInf",
    # activations
    "Celu", "Elu", "Gelu", "HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "Relu", "Selu",
    "Sigmoid", "Softplus", "Softsign", "ThresholdedRelu", "Softmax", "LogSoftmax", "Hardmax",
    # linear algebra and convolution
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum",
    # normalization and pooling
    "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LpNormalization",
    "GroupNormalization", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "MaxPool",
    "LpPool", "Dropout",
    # reductions
    "ArgMax", "ArgMin", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "CumSum",
    # shapes and data movement (static shapes only)
    "Cast", "CastLike", "Concat", "Constant", "ConstantOfShape", "DepthToSpace", "Expand",
    "Flatten", "Gather", "GatherElements", "GatherND", "Identity", "OneHot", "Pad", "Range",
    "Reshape", "Resize", "ScatterElements", "ScatterND", "Shape", "Size", "Slice",
    "SpaceToDepth", "Split", "Squeeze", "Tile", "TopK", "Transpose", "Trilu", "Unsqueeze",
    "Upsample",
    # quantization
    "DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
    "ConvInteger", "QLinearConv", "QLinearMatMul",
})


def unsupported(op_types) -> list[str]:
    return sorted({op for op in op_types if op not in SUPPORTED_OPS})
