"""rebuild="always": build again even when a matching build is in the cache."""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs, rebuild="always")
print(f"Groq_outputs: {groq_model(**inputs)}")
print("Example rebuild_always.py finished")
