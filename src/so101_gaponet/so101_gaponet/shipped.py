"""Where the shipped compensator lives in the source checkout (``so101 train-compensator`` rebuilds it)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SHIPPED_MODEL"]

# models/ at the workspace root; installed copies are found through so101_bringup.share.models_dir()
SHIPPED_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"
