"""Rebuild the shipped model ``models/gaponet_so101_default.onnx`` from code in the repo.

``python -m so101_gaponet.make_default [--out models/gaponet_so101_default.onnx]`` generates the
synthetic paired dataset (profile ``default`` of :mod:`so101_gaponet.synthetic`, seed 0) in a
temporary folder and trains the DeepONet on it with the settings below through the same path as
``so101 train-gaponet``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from so101_gaponet.model_file import load_model
from so101_gaponet.synthetic import make_dataset, tracking_rms
from so101_gaponet.train_cli import train_and_export

__all__ = ["DEFAULT_MODEL", "DEFAULT_SETTINGS", "main"]

DEFAULT_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"
DEFAULT_SETTINGS = {"arch": "deeponet", "history": 4, "horizon": 1, "epochs": 30, "hidden": 64, "seed": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_MODEL, help=f"model file (default {DEFAULT_MODEL})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = make_dataset(Path(tmp) / "synthetic_default", profile="default", episodes=6, seconds=20.0, seed=0)
        figures = train_and_export([dataset], args.out, "onnx", **DEFAULT_SETTINGS)
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v:.4g}" for k, v in figures.items()))
    plain, compensated = tracking_rms(load_model(args.out))
    print(f"closed loop on the synthetic arm, RMS distance from the ideal sim (rad): uncompensated "
          f"{np.round(plain, 4).tolist()}, compensated {np.round(compensated, 4).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
