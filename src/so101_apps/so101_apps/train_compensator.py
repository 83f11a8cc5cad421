"""``so101 train-compensator``: GapONet compensators trained on virtual arms, judged on arms and motions they never saw.

    so101 train-compensator                                   # rebuilds models/gaponet_so101_default.onnx
    so101 train-compensator --profile worn --out worn.onnx    # the shipped model refined on one arm
    so101 train-compensator --profile worn --scratch          # the previous method: that arm's own model

Without ``--profile``: the population compensator, the shipped default — excitation on arms drawn from the
gap-profile population (simulated time), one model trained on all of them, judged on held-out arms (drawn
from the population's test seeds, and any ``--eval-profile``) on the held-out motions, with the feed-forward's
stability on every arm (``so101_apps.compensation.recipe.train_population_compensator``).

With ``--profile``: the shipped (or ``--from``) population model refined on that arm, collecting excitation
until its validation stops improving (a progress line per episode says why it stopped), judged before and
after (``refine_compensator``); ``--scratch``: a model of that arm's own from a fixed number of episodes.

The evaluation motions default to the real SAGE motions in ``config/motions`` (never trained on: training
uses excitation motions only). Reports are written to ``OUT.json``. Exits 1 when a compensator makes a
joint worse, pooled over the evaluation motions, on an arm it is judged on.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from so101_apps.compensation.recipe import (
    PopulationRecipe,
    Recipe,
    format_distribution,
    format_table,
    refine_compensator,
    train_compensator,
    train_population_compensator,
)
from so101_bringup.share import config_dir, models_dir
from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_gaponet.refine import RefineSettings
from so101_policy.motions import load_motion

__all__ = ["add_arguments", "run", "default_eval_motions"]

_RECIPE = Recipe()
_POPULATION = PopulationRecipe()
_REFINE = RefineSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default=None,
                        help="refine for this arm (gap profile name or YAML file); default: train the population model")
    parser.add_argument("--out", type=Path, default=None, help="model file (default models/gaponet_so101_default.onnx "
                                                               "without --profile, else gaponet_<profile>.onnx)")
    parser.add_argument("--eval-motion", nargs="+", default=None, metavar="FILE",
                        help="SAGE motion files to judge on (default: config/motions/*.txt)")
    parser.add_argument("--eval-profile", nargs="*", default=[], metavar="PROFILE",
                        help="further arms to judge the model on as it is (population: beside the drawn held-out arms)")
    population = parser.add_argument_group("the population model (without --profile)")
    population.add_argument("--arms", type=int, default=_POPULATION.arms, help="training arms (population seeds 0..N-1)")
    population.add_argument("--eval-arms", type=int, default=_POPULATION.eval_arms,
                            help="held-out arms drawn from the population's test seeds")
    population.add_argument("--data", type=Path, default=None,
                            help="keep the arms' excitation datasets here (reused by a later run with the same arms)")
    refine = parser.add_argument_group("per-arm (with --profile)")
    refine.add_argument("--from", dest="start", type=Path, default=None,
                        help="population model to refine (default: the shipped models/gaponet_so101_default.onnx)")
    refine.add_argument("--max-episodes", type=int, default=_REFINE.max_episodes, help="cap on excitation episodes")
    refine.add_argument("--scratch", action="store_true",
                        help="the previous method: this arm's own model from --episodes excitation motions")
    parser.add_argument("--episodes", type=int, default=None,
                        help=f"excitation motions per arm (population: {_POPULATION.episodes}; --scratch: {_RECIPE.episodes})")
    parser.add_argument("--duration", type=float, default=_RECIPE.duration, help="s per excitation motion")
    parser.add_argument("--epochs", type=int, default=None, help="training epochs")
    parser.add_argument("--seed", type=int, default=_RECIPE.seed, help="training seed")


def default_eval_motions() -> list[tuple[str, JointTrajectory]]:
    """The real SAGE motions shipped in ``config/motions``."""
    return [(f.stem, load_motion(str(f))) for f in sorted((config_dir() / "motions").glob("*.txt"))]


def run(args: argparse.Namespace) -> int:
    motions = ([(Path(f).stem, load_motion(f)) for f in args.eval_motion] if args.eval_motion
               else default_eval_motions())
    shipped = models_dir() / "gaponet_so101_default.onnx"
    if args.profile is None:
        return _population(args, args.out or shipped, motions)
    out = args.out or Path(f"gaponet_{Path(args.profile).stem}.onnx")
    if args.scratch:
        recipe = Recipe(episodes=args.episodes or _RECIPE.episodes, duration=args.duration,
                        epochs=args.epochs or _RECIPE.epochs, seed=args.seed)
        print(f"training a compensator for {args.profile} from scratch: {recipe.episodes} excitation motions of "
              f"{recipe.duration:g} s, judged on {', '.join(n for n, _ in motions)}")
        report = train_compensator(args.profile, out, motions, recipe, args.eval_profile)
        print(f"wrote {out} ({report['collect_s']} s collecting, {report['train_s']} s training) and {out.with_suffix('.json')}")
    else:
        settings = RefineSettings(max_episodes=max(args.max_episodes, _REFINE.min_episodes),
                                  epochs=args.epochs or _REFINE.epochs, seed=args.seed)
        start = args.start or shipped
        print(f"refining {start} for {args.profile} with {args.duration:g} s excitation episodes until validation stops "
              f"improving (at most {settings.max_episodes}), judged on {', '.join(n for n, _ in motions)}")
        report = refine_compensator(args.profile, start, out, motions, settings, args.duration)
        print(f"wrote {out} ({report['episodes']} episodes, stopped: {report['stopped']}; {report['refine_s']} s) "
              f"and {out.with_suffix('.json')}")
    for evaluation in report["evaluations"]:
        print("\n" + format_table(evaluation))
    final = report["evaluations"][-1] if not args.scratch else report["evaluations"][0]
    worse = [n for n in JOINT_NAMES if final["pooled"][n]["cut_percent"] < 0]
    if worse:
        print(f"\nthe compensator makes {', '.join(worse)} worse on {final['profile']}: do not deploy it")
        return 1
    return 0


def _population(args: argparse.Namespace, out: Path, motions: list[tuple[str, JointTrajectory]]) -> int:
    recipe = PopulationRecipe(arms=args.arms, episodes=args.episodes or _POPULATION.episodes, duration=args.duration,
                              epochs=args.epochs or _POPULATION.epochs, seed=args.seed, eval_arms=args.eval_arms)
    print(f"training the population compensator on {recipe.arms} arms × {recipe.episodes} excitation motions of "
          f"{recipe.duration:g} s, judged on {recipe.eval_arms} held-out arms{' and ' + ', '.join(args.eval_profile) if args.eval_profile else ''} "
          f"× {', '.join(n for n, _ in motions)}")
    report = train_population_compensator(out, motions, recipe, args.eval_profile, args.data)
    print(f"\nwrote {out} ({report['collect_s']} s collecting, {report['train_s']} s training) and {out.with_suffix('.json')}")
    print(format_distribution(report["distribution"]))
    stable = report["stability"]
    print(f"feed-forward stability (settles at a held target, no ringing): {stable['settled']} of {stable['arms']} arms"
          + (f"; not settled: {', '.join(stable['unsettled'])}" if stable["unsettled"] else "")
          + (f" ({len(stable['not_judged'])} arms trip a servo protection on the move uncompensated: not judged)"
             if stable["not_judged"] else ""))
    worse = [(e["profile"], n) for e in report["evaluations"] for n in JOINT_NAMES if e["pooled"][n]["cut_percent"] < 0]
    if worse or stable["unsettled"]:
        print("the compensator makes " + ", ".join(f"{n} on {p}" for p, n in worse) + " worse or does not settle: do not ship it")
        return 1
    return 0
