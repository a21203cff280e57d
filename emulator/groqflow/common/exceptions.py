"""GroqFlow's exceptions: each is printed as `Error: ...` with the fail whale, then raised."""


class GroqFlowError(Exception):
    """Base of every error GroqFlow reports."""


class Error(GroqFlowError):
    pass


class ArgError(GroqFlowError):
    """groqit() was called with arguments that cannot work together."""


class StageError(GroqFlowError):
    """A build stage failed; the log file of the stage says more."""


class SkipBuild(GroqFlowError):
    pass


class EnvError(GroqFlowError):
    pass


class ModelArgError(GroqFlowError):
    """GroqModel.run()/benchmark() received inputs it cannot take."""


class ModelRuntimeError(GroqFlowError):
    """The model could not run on GroqChips."""
