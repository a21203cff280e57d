"""GroqFlow as the emulated GroqRack runs it: `groqit()` builds a model for GroqChips.

Our own implementation of GroqFlow 4.3.1's user API (reference/groq.md §5): real ONNX
export, an op check against the GroqChip op set, fp16 conversion, a "compile" whose cycle
count comes from aitestbed.groq.timing, and execution with ONNX Runtime on the CPU on chips
lent by the node's tspd (aitestbed.groq.runtime).
"""

from groqflow.justgroqit.groqit import groqit
from groqflow.version import __version__

__all__ = ["groqit", "__version__"]
