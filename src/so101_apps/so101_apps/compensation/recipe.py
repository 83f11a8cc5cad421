"""Train a compensator for one virtual arm on excitation motions and judge it on motions it never saw.

The recipe behind ``so101 train-compensator`` (which rebuilds ``models/gaponet_so101_default.onnx``):
excitation episodes (``so101_gaponet.excitation``) played uncompensated on the arm in simulated time
and paired with the MuJoCo replay → GapONet training (``so101_gaponet.export.train_and_export``, the
trainer's defaults) → closed-loop evaluation on the evaluation motions, per joint: real-vs-sim RMSE
without and with the compensator. The figures go into a JSON report beside the model.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from so101_apps.compensation.harness import MotionResult, evaluate, excitation_dataset, pooled
from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_gaponet.excitation import excitation_motion
from so101_gaponet.export import train_and_export
from so101_gaponet.model_file import load_model
from so101_virtual.profiles import GapProfile, load_profile

__all__ = ["Recipe", "train_compensator", "format_table"]


@dataclass(frozen=True)
class Recipe:
    """How much excitation and training."""

    episodes: int = 4  # excitation motions (seeds 0 … episodes − 1)
    duration: float = 30.0  # s per excitation motion
    epochs: int = 30
    seed: int = 0  # training seed


def train_compensator(profile: GapProfile | str, out: Path, eval_motions: Sequence[tuple[str, JointTrajectory]],
                      recipe: Recipe = Recipe(), eval_profiles: Sequence[GapProfile | str] = (),
                      progress: bool = True) -> dict[str, Any]:
    """Collect, train, write ``out`` (ONNX) and ``out.with_suffix('.json')`` (the report); return the report.

    ``eval_profiles``: further arms the model is run on as it is (each also reported); the arm it was
    trained on is always evaluated.
    """
    arm = load_profile(profile)
    started = time.monotonic()
    names = [f"excitation-{seed}" for seed in range(recipe.episodes)]
    motions = [excitation_motion(seed, recipe.duration) for seed in range(recipe.episodes)]
    with tempfile.TemporaryDirectory(prefix="so101_excitation_") as folder:
        dataset = excitation_dataset(arm, motions, names).save(Path(folder) / "excitation")
        collected = time.monotonic() - started
        figures = train_and_export([dataset], out, "onnx", epochs=recipe.epochs, seed=recipe.seed, progress=progress)
    trained = time.monotonic() - started - collected
    model = load_model(out)
    report: dict[str, Any] = {"profile": arm.name, "model": str(out), "recipe": asdict(recipe),
                              "excitation": names, "collect_s": round(collected, 1), "train_s": round(trained, 1),
                              "training": figures, "evaluations": []}
    for evaluated in (arm, *[load_profile(p) for p in eval_profiles]):
        results = evaluate(evaluated, eval_motions, model)
        report["evaluations"].append(_evaluation(evaluated.name, results))
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _evaluation(profile: str, results: Sequence[MotionResult]) -> dict[str, Any]:
    total = pooled(results)
    return {"profile": profile, "motions": [r.to_dict() for r in results],
            "pooled": {n: {"before": r.before, "after": r.after, "cut_percent": r.cut_percent} for n, r in total.items()}}


def format_table(evaluation: dict[str, Any]) -> str:
    """Per motion and pooled: RMSE without → with compensation and the cut, per joint."""
    lines = [f"profile {evaluation['profile']}: real-vs-sim position RMSE (rad), without → with compensation, cut %",
             f"{'motion':>16} " + " ".join(f"{SHORT_NAMES[n]:>22}" for n in JOINT_NAMES)]
    rows = [(m["motion"], m["joints"]) for m in evaluation["motions"]] + [("pooled", evaluation["pooled"])]
    for name, joints in rows:
        cells = " ".join(f"{j['before']:.4f}→{j['after']:.4f} {j['cut_percent']:+5.0f}%"
                         for j in (joints[n] for n in JOINT_NAMES))
        lines.append(f"{name:>16} {cells}")
    return "\n".join(lines)
