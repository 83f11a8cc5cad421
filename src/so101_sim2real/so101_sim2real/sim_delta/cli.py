"""``so101 train-sim-delta``: learn Δ so that MuJoCo driven with ``a + Δ`` does what the real SO-101 did.

Reads SAGE real runs (``output/real/<robot>/<source>/<motion>/`` folders, or folders of them),
keeps the held-out motions of :func:`..recordings.split_heldout` out of training, trains, exports
the model (ONNX or TorchScript, role ``sim_delta``), reloads the file and reports, per joint, the
position RMSE between the MuJoCo replay and the real arm on the held-out motions, nominal and with
Δ, in closed loop through the same filter as ``so101 replay --delta-model``.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np

from so101_common.atomic_output import write_text_atomically
from so101_sim2real.sim_delta import SIM_DELTA_KINDS
from so101_sim2real.sim_delta.evaluate import Evaluation

__all__ = ["add_arguments", "run", "format_table"]



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sage-real", action="append", required=True, type=Path,
                        help="SAGE real run folder, or a folder of them (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="model file to write, e.g. models/so101_sim_delta.onnx")
    parser.add_argument("--arch", choices=SIM_DELTA_KINDS, default="mlp", help="network (default mlp)")
    parser.add_argument("--compare", action="store_true",
                        help="also train every other architecture and print their held-out figures (not exported)")
    parser.add_argument("--all-motions", action="store_true",
                        help="train on every motion, no held-out set (then no held-out figures are claimed)")
    parser.add_argument("--report", type=Path, default=None, help="JSON file for the held-out figures (default OUT.json)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def format_table(name: str, evaluation: Evaluation) -> str:
    """Per-joint held-out RMSE table (rad, and % cut)."""
    lines = [f"{name}: position RMSE MuJoCo vs real on {len(evaluation.motions)} held-out motions",
             f"  {'joint':<15}{'nominal':>10}{'with Δ':>10}{'cut %':>8}"]
    lines += [f"  {r['joint']:<15}{r['nominal_rmse_rad']:>10.4f}{r['delta_rmse_rad']:>10.4f}{r['cut_percent']:>8.1f}"
              for r in evaluation.rows()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from so101_gaponet.metadata import ModelFileError
    from so101_gaponet.model_file import load_model, save_onnx, save_torchscript
    from so101_sim2real.sim_delta.evaluate import evaluate
    from so101_sim2real.sim_delta.recordings import HELDOUT_RULE, RecordingError, load_recordings, split_heldout
    from so101_sim2real.sim_delta.trainer import SimDeltaConfig, train_sim_delta

    try:
        recordings = load_recordings(args.sage_real)
    except RecordingError as err:
        print(f"error: {err}")
        return 1
    train, heldout = (recordings, []) if args.all_motions else split_heldout(recordings)
    if not train:
        print("error: no training motions")
        return 1
    print(f"training on {len(train)} motions; held out: {', '.join(r.name for r in heldout) or 'none'}")
    report: dict[str, object] = {"heldout_motions": [r.name for r in heldout], "training_motions": [r.name for r in train]}
    cache: dict[str, np.ndarray] = {}
    archs = [args.arch] + ([k for k in SIM_DELTA_KINDS if k != args.arch] if args.compare else [])
    for arch in archs:
        result = train_sim_delta(train, SimDeltaConfig(arch=arch, seed=args.seed, progress=True), progress=lambda m: print(f"  {m}"))
        metadata = result.metadata.model_copy(update={"provenance": result.metadata.provenance | {
            "heldout_motions": [r.name for r in heldout], "heldout_rule": HELDOUT_RULE}})
        out = args.out if arch == args.arch else args.out.with_name(f"{args.out.stem}_{arch}{args.out.suffix}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (save_onnx if out.suffix == ".onnx" else save_torchscript)(result.module, metadata, out)
            model = load_model(out, role="sim_delta")
        except ModelFileError as err:
            print(f"error: {err}")
            return 1
        entry: dict[str, object] = {"train_seconds": round(result.seconds, 1), "log": result.log}
        if heldout:
            evaluation = evaluate(heldout, model.delta, model.metadata, cache, progress=True, reset_state=model.reset_state)
            print(format_table(arch, evaluation))
            entry["heldout"] = evaluation.rows()
            entry["per_motion"] = {name: {"nominal": np.round(n, 5).tolist(), "with_delta": np.round(d, 5).tolist()}
                                   for name, (n, d) in evaluation.per_motion.items()}
        print(f"{arch}: trained in {result.seconds:.0f} s -> {out}")
        report[arch] = entry
        if arch != args.arch:
            out.unlink()  # comparison models are measured, not shipped
    report_path = args.report or args.out.with_suffix(".json")
    write_text_atomically(report_path, json.dumps(report, indent=1))
    print(f"wrote {args.out} and {report_path}")
    return 0
