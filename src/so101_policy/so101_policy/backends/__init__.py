"""The three policy backends: ONNX (:mod:`.onnx`), TorchScript (:mod:`.torchscript`), LeRobot (:mod:`.lerobot`)."""

__all__: list[str] = []
