from groqflow.groqmodel.groqmodel import (
    GroqEstimatedPerformance,
    GroqMeasuredPerformance,
    GroqModel,
    PytorchModelWrapper,
    load,
)

__all__ = ["GroqModel", "PytorchModelWrapper", "GroqEstimatedPerformance",
           "GroqMeasuredPerformance", "load"]
