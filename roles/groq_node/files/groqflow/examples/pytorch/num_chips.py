"""Build a model for a chosen number of GroqChips (2, in a Dragonfly topology)."""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs, num_chips=2)
print(f"Chips used: {groq_model.state.num_chips_used}")
groq_outputs = groq_model(**inputs)
print(f"Groq_outputs: {groq_outputs}")
print("Example num_chips.py finished")
