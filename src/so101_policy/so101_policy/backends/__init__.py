"""The policy backends: ONNX (:mod:`.onnx`), TorchScript (:mod:`.torchscript`), LeRobot (:mod:`.lerobot`) in
process, and a LeRobot policy server over gRPC (:mod:`.policy_server`)."""

__all__: list[str] = []
