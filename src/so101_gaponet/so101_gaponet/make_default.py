"""Rebuild the shipped model ``models/gaponet_so101_default.onnx`` from code in the repo.

``python -m so101_gaponet.make_default [--out models/gaponet_so101_default.onnx]`` generates the
synthetic paired dataset (profile ``default`` of :mod:`so101_gaponet.synthetic`, seed 0) in a
temporary folder and trains the DeepONet on it with the settings below through the same path as
``so101 train-gaponet``, then runs the closed-loop acceptance check
(:func:`so101_gaponet.synthetic.closed_loop_check`: held targets settle, a slow sine tracks no worse
than uncompensated) on the training arm and on :data:`CHECK_PROFILES`' other arm, a stiff servo behind
two steps of dead time that the model never saw. The model file is replaced only when every check passes.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from so101_gaponet.export import train_and_export
from so101_gaponet.model_file import load_model
from so101_gaponet.synthetic import closed_loop_check, make_dataset, tracking_rms

__all__ = ["CHECK_PROFILES", "DEFAULT_MODEL", "DEFAULT_SETTINGS", "main"]

DEFAULT_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"
# horizon 5 steps = the synthetic arm's 100 ms lag at 50 Hz; Δ bounds from the data, capped at 0.1 rad;
# Δ slew limit a tenth of the bound per step; the 0.1 s low-pass on Δ keeps the loop quiet on arms with
# more dead time than the training arm (without it the stiff_delayed check rings at ~0.02 rad).
DEFAULT_SETTINGS = {"arch": "deeponet", "history": 4, "horizon": 5, "epochs": 30, "hidden": 64, "seed": 0,
                    "delta_l2": 0.05, "delta_smoothing_s": 0.1}
CHECK_PROFILES = ("default", "stiff_delayed")  # the training arm, and an arm unlike it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_MODEL, help=f"model file (default {DEFAULT_MODEL})")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = make_dataset(Path(tmp) / "synthetic_default", profile="default", episodes=6, seconds=20.0, seed=0)
        candidate = Path(tmp) / args.out.name
        figures = train_and_export([dataset], candidate, "onnx", **DEFAULT_SETTINGS)
        print("trained: " + ", ".join(f"{k} {v:.4g}" for k, v in figures.items()))
        model = load_model(candidate)
        slew = model.metadata.delta_slew_limit
        print(f"Δ bounds {np.round(model.metadata.delta_bounds, 4).tolist()} rad, slew limit "
              f"{np.round(slew, 4).tolist() if slew is not None else 'none'} rad/step")
        checks = {profile: closed_loop_check(model, profile=profile) for profile in CHECK_PROFILES}
        for profile, check in checks.items():
            print(f"closed-loop check on the synthetic arm {profile!r}: {check.describe()}")
        plain, compensated = tracking_rms(model)
        print(f"random commands, RMS distance from the ideal sim (rad): uncompensated "
              f"{np.round(plain, 4).tolist()}, compensated {np.round(compensated, 4).tolist()}")
        failed = [f"{p} (settled {c.settled}, tracks no worse {c.tracks_no_worse})" for p, c in checks.items() if not c.passed]
        if failed:
            print(f"error: the model failed the closed-loop check on {', '.join(failed)}; {args.out} left unchanged")
            return 1
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(candidate, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
