"""Load a learned policy (LeRobot pretrained directory, ONNX or TorchScript) behind one interface.

No rclpy here. :func:`load_policy` tells the kind (:func:`detect_kind`) and hands the path to its
backend (:mod:`so101_policy.backends`); every backend returns a :class:`~so101_policy.spec.PolicyModel`
whose ``spec`` converts units and joint order (applied by :class:`so101_policy.runner.PolicyRunner`).
"""

from __future__ import annotations

import os
from pathlib import Path

from so101_policy.backends.lerobot import load_lerobot
from so101_policy.backends.onnx import ONNX_SUFFIXES, load_onnx
from so101_policy.backends.torchscript import TORCHSCRIPT_SUFFIXES, load_torchscript
from so101_policy.spec import PolicyLoadError, PolicyModel

__all__ = ["POLICY_KINDS", "detect_kind", "load_policy"]

POLICY_KINDS = ("auto", "lerobot", "onnx", "torchscript")


def detect_kind(path: str | os.PathLike[str]) -> str:
    """``lerobot`` for a directory, ``onnx`` / ``torchscript`` by file suffix."""
    p = Path(path)
    if not p.exists():
        raise PolicyLoadError(f"policy path {str(p)!r} does not exist")
    if p.is_dir():
        return "lerobot"
    suffix = p.suffix.lower()
    if suffix in ONNX_SUFFIXES:
        return "onnx"
    if suffix in TORCHSCRIPT_SUFFIXES:
        return "torchscript"
    raise PolicyLoadError(f"cannot tell the kind of policy {str(p)!r}: expected a LeRobot pretrained_model "
                          f"directory, an ONNX file ({', '.join(ONNX_SUFFIXES)}) or a TorchScript file "
                          f"({', '.join(TORCHSCRIPT_SUFFIXES)}); or set policy_kind explicitly")


def load_policy(path: str | os.PathLike[str], kind: str = "auto", device: str = "cpu", *,
                trust_remote_code: bool = False, allow_network: bool = False) -> PolicyModel:
    """Load the policy at ``path`` (``kind``: auto | lerobot | onnx | torchscript).

    Trust model (:mod:`so101_policy.trust`): a LeRobot folder is refused when its processors name code
    outside LeRobot unless ``trust_remote_code``; loading is offline unless ``allow_network``. A
    TorchScript file is code (``torch.jit.load`` runs it): pass only files you trust; prefer ONNX.
    """
    if not str(path):
        raise PolicyLoadError("no policy path given (parameter policy_path is empty)")
    p = Path(path).expanduser()
    if not p.exists():
        raise PolicyLoadError(f"policy path {str(p)!r} does not exist")
    if kind == "auto":
        kind = detect_kind(p)
    if kind == "lerobot":
        return load_lerobot(p, device=device, trust_remote_code=trust_remote_code, allow_network=allow_network)
    if kind == "torchscript":
        return load_torchscript(p, device=device)
    if kind == "onnx":
        return load_onnx(p, device=device)
    raise PolicyLoadError(f"unknown policy kind {kind!r}; use one of {list(POLICY_KINDS)}")
