"""Estimate a build's performance from its compiled cycle count (no GroqChip needed)."""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs)
estimate = groq_model.estimate_performance()

print("Your build's estimated performance is:")
print(f"{estimate.latency:.7f} {estimate.latency_units}")
print(f"{estimate.throughput:.1f} {estimate.throughput_units}")
print("Example estimate_performance.py finished")
