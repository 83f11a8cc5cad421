"""Learned-policy inference node (LeRobot pretrained directories, TorchScript, ONNX)."""
