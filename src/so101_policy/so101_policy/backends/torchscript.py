"""TorchScript policies: ``forward(state, *images) -> actions`` with embedded or sidecar metadata.

A TorchScript file is a *program*: ``torch.jit.load`` runs the code serialised in it. Load only files
you trust as you would trust a Python script; prefer ONNX (data only) for anything you did not build.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from so101_policy.images import images_for
from so101_policy.metadata import read_metadata, spec_from_metadata
from so101_policy.spec import METADATA_KEY, PolicyLoadError, PolicyObservation, PolicySpec

__all__ = ["TORCHSCRIPT_SUFFIXES", "TorchScriptPolicy", "load_torchscript"]

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".jit")


class TorchScriptPolicy:
    """A TorchScript module: ``forward(state, *images) -> actions``."""

    def __init__(self, module: Any, spec: PolicySpec, device: str) -> None:
        import torch

        self._torch = torch
        self.module = module
        self.spec = spec
        self.device = torch.device(device)

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        torch = self._torch
        state = torch.from_numpy(self.spec.state_array(obs.state)).unsqueeze(0).to(self.device)
        images = [torch.from_numpy(v).unsqueeze(0).to(self.device) for v in images_for(self.spec, obs).values()]
        with torch.inference_mode():
            out = self.module(state, *images)
        if isinstance(out, (tuple, list)):
            out = out[0]
        return self.spec.actions_from_output(out.detach().cpu().numpy())

    def reset(self) -> None:
        if hasattr(self.module, "reset"):
            self.module.reset()


def load_torchscript(path: str | os.PathLike[str], device: str = "cpu") -> TorchScriptPolicy:
    """Load a TorchScript policy (this runs code from the file: see the module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise PolicyLoadError(f"TorchScript policy {str(p)!r} does not exist or is not a file")
    import torch

    extra = {f"{METADATA_KEY}.json": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch >= 2.10 deprecates TorchScript; it still loads
            module = torch.jit.load(str(p), map_location=device, _extra_files=extra)
    except Exception as err:
        raise PolicyLoadError(f"{p}: not a loadable TorchScript module: {err}") from err
    module.eval()
    meta, where = read_metadata(p, extra[f"{METADATA_KEY}.json"] or None)
    return TorchScriptPolicy(module, spec_from_metadata(meta, kind="torchscript", source=str(p), where=where), device)
