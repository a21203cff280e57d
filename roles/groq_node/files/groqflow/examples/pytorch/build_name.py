"""Give builds their own names, so two models of one script do not share a cache entry."""

import torch
from _model import SmallModel
from groqflow import groqit

inputs = {"x": torch.rand(10)}
groqit(SmallModel(), inputs, build_name="small_model_1")
groqit(SmallModel(output_size=7), inputs, build_name="small_model_2")
print("Example build_name.py finished")
