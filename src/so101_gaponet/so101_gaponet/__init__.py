"""GapONet compensation: model file contract, ONNX/TorchScript runtime, training and the compensator node."""
