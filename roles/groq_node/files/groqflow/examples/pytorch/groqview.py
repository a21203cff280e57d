"""Build with groqview=True and open GroqView (stop it with Ctrl-C)."""

from _model import model_and_inputs
from groqflow import groqit

pytorch_model, inputs = model_and_inputs()
groq_model = groqit(pytorch_model, inputs, groqview=True)
groq_model.groqview()
print("Example groqview.py finished")
