"""GapONet compensation: model file contract, ONNX/TorchScript runtime, training and the compensator node.

The core API re-exported here imports numpy only; torch is loaded when a TorchScript model is
loaded or training runs.
"""

from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError, StepResult
from so101_gaponet.metadata import GapModelMetadata, ModelFileError
from so101_gaponet.model_file import load_model, read_metadata
from so101_gaponet.runtime import GapModel

__all__ = ["Compensator", "CompensatorConfig", "CompensatorError", "StepResult", "GapModel", "GapModelMetadata",
           "ModelFileError", "load_model", "read_metadata"]
