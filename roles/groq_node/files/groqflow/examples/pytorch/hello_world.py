"""
Hello ** Groq ** World!

Build a small PyTorch model with groqit(), run it on a GroqChip and compare with PyTorch.
"""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs)

pytorch_outputs = pytorch_model(**inputs)
groq_outputs = groq_model(**inputs)

print(f"Pytorch_outputs: {pytorch_outputs}")
print(f"Groq_outputs: {groq_outputs}")
print("Example hello_world.py finished")
