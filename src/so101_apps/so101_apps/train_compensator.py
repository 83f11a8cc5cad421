"""``so101 train-compensator``: the GapONet compensator for one virtual arm, judged on motions it never saw.

    so101 train-compensator                                   # rebuilds models/gaponet_so101_default.onnx
    so101 train-compensator --profile worn --out worn.onnx --eval-profile default

Excitation episodes on the virtual SO-101 (simulated time) → paired with the MuJoCo replay → trained →
closed-loop evaluation on the evaluation motions (default: the SAGE motions in ``config/motions`` and the
built-in ``wave`` and ``sweep``), printed per joint and written to ``OUT.json``. Exits 1 when the
compensator makes any joint worse (pooled over the evaluation motions) on the arm it was trained for.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_apps.compensation.recipe import Recipe, format_table, train_compensator
from so101_bringup.share import config_dir, models_dir
from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_policy.motions import builtin_motion, load_motion

__all__ = ["add_arguments", "run", "default_eval_motions"]

_RECIPE = Recipe()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--out", type=Path, default=None, help="model file (default models/gaponet_so101_default.onnx)")
    parser.add_argument("--eval-motion", nargs="+", default=None, metavar="FILE",
                        help="SAGE motion files to judge on (default: config/motions/*.txt, wave and sweep)")
    parser.add_argument("--eval-profile", nargs="*", default=[], metavar="PROFILE",
                        help="further arms to run the model on as it is (reported beside the training arm)")
    parser.add_argument("--episodes", type=int, default=_RECIPE.episodes, help="excitation motions (seeds 0..N-1)")
    parser.add_argument("--duration", type=float, default=_RECIPE.duration, help="s per excitation motion")
    parser.add_argument("--epochs", type=int, default=_RECIPE.epochs, help="training epochs")
    parser.add_argument("--seed", type=int, default=_RECIPE.seed, help="training seed")


def default_eval_motions() -> list[tuple[str, JointTrajectory]]:
    """The SAGE motions shipped in ``config/motions`` and the built-in ``wave`` and ``sweep``."""
    files = sorted((config_dir() / "motions").glob("*.txt"))
    return [(f.stem, load_motion(str(f))) for f in files] + [(n, builtin_motion(n)) for n in ("wave", "sweep")]


def run(args: argparse.Namespace) -> int:
    out = args.out or models_dir() / "gaponet_so101_default.onnx"
    motions = ([(Path(f).stem, load_motion(f)) for f in args.eval_motion] if args.eval_motion
               else default_eval_motions())
    recipe = Recipe(episodes=args.episodes, duration=args.duration, epochs=args.epochs, seed=args.seed)
    print(f"training a compensator for {args.profile}: {recipe.episodes} excitation motions of {recipe.duration:g} s, "
          f"judged on {', '.join(n for n, _ in motions)}")
    report = train_compensator(args.profile, out, motions, recipe, args.eval_profile)
    print(f"wrote {out} ({report['collect_s']} s collecting, {report['train_s']} s training) and {out.with_suffix('.json')}")
    for evaluation in report["evaluations"]:
        print("\n" + format_table(evaluation))
    worse = [n for n in JOINT_NAMES if report["evaluations"][0]["pooled"][n]["cut_percent"] < 0]
    if worse:
        print(f"\nthe compensator makes {', '.join(worse)} worse on {report['profile']}: do not deploy it")
        return 1
    return 0
