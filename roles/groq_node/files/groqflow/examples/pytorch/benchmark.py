"""Measure a build's latency and throughput on GroqChips."""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs)
performance = groq_model.benchmark(inputs)

print("Your build's performance is:")
print(f"{performance.latency:.7f} {performance.latency_units}")
print(f"{performance.throughput:.1f} {performance.throughput_units}")
print("Example benchmark.py finished")
