"""``so101 train-compensator``: GapONet compensators trained on virtual arms, judged on motions (and arms) they never saw.

    so101 train-compensator                                   # rebuilds models/gaponet_so101_default.onnx
    so101 train-compensator --profile worn --out worn.onnx --eval-profile default
    so101 train-compensator --population --out pop.onnx       # experimental: one model for a population of arms
    so101 train-compensator --profile worn --refine models/gaponet_so101_default.onnx  # the shipped model refined
    so101 train-compensator --profile worn --refine pop.onnx  # experimental: a population model refined on one arm

Default (one arm's own model, the shipped method): excitation episodes on the virtual SO-101 of ``--profile``
(simulated time) → paired with the MuJoCo replay → trained → closed-loop evaluation on the evaluation motions
(default: the real SAGE motions in ``config/motions``), printed per joint and written to ``OUT.json``.

``--population``: excitation on arms drawn from the gap-profile population, one model trained on all of them,
judged on held-out arms (the population's test seeds and any ``--eval-profile``) with the feed-forward's
stability on every arm (``so101_apps.compensation.recipe.train_population_compensator``); experimental: measured
on held-out arms it does not yet beat one arm's own model (``docs/research/gaponet.md``). ``--refine FROM``: that
model refined on ``--profile`` (the arm's own model starting from a per-arm model such as the shipped one, as
``so101 demo --start-model`` does; a population model fine-tuned), collecting excitation until its validation stops improving
(a progress line per episode says why it stopped), judged before and after.

Exits 1 when a compensator makes a joint worse, pooled over the evaluation motions, on an arm it is judged on.
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
from so101_common.cli_args import positive_float, positive_int
from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_gaponet.refine import RefineSettings
from so101_policy.motions import load_motion

__all__ = ["add_arguments", "run", "default_eval_motions"]

_RECIPE = Recipe()
_POPULATION = PopulationRecipe()
_REFINE = RefineSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="default", help="gap profile of the virtual arm (name or YAML file)")
    parser.add_argument("--out", type=Path, default=None,
                        help="model file (default: models/gaponet_so101_default.onnx for the default arm, else "
                             "gaponet_<profile>.onnx; with --population gaponet_population.onnx)")
    parser.add_argument("--eval-motion", nargs="+", default=None, metavar="FILE",
                        help="SAGE motion files to judge on (default: config/motions/*.txt)")
    parser.add_argument("--eval-profile", nargs="*", default=[], metavar="PROFILE",
                        help="further arms to judge the model on as it is")
    parser.add_argument("--episodes", type=positive_int, default=None,
                        help=f"excitation motions per arm (default {_RECIPE.episodes}; --population: {_POPULATION.episodes})")
    parser.add_argument("--duration", type=positive_float, default=_RECIPE.duration, help="s per excitation motion")
    parser.add_argument("--epochs", type=positive_int, default=None, help="training epochs")
    parser.add_argument("--seed", type=int, default=_RECIPE.seed, help="training seed")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--refine", type=Path, default=None, metavar="FROM",
                      help="refine this model (ONNX: a per-arm compensator such as the shipped "
                           "gaponet_so101_default.onnx, or a population model) on --profile, collecting excitation "
                           "until validation stops improving")
    mode.add_argument("--population", action="store_true",
                      help="experimental: one model for a population of arms (measured: not yet better than one "
                           "arm's own model)")
    experimental = parser.add_argument_group("with --population (experimental)")
    experimental.add_argument("--arms", type=positive_int, default=_POPULATION.arms, help="training arms (population seeds 0..N-1)")
    experimental.add_argument("--eval-arms", type=int, default=_POPULATION.eval_arms,
                              help="held-out arms drawn from the population's test seeds")
    experimental.add_argument("--data", type=Path, default=None,
                              help="keep the arms' excitation datasets here (reused by a later run with the same arms)")
    parser.add_argument("--max-episodes", type=positive_int, default=_REFINE.max_episodes,
                        help="with --refine: cap on excitation episodes")


def default_eval_motions() -> list[tuple[str, JointTrajectory]]:
    """The real SAGE motions shipped in ``config/motions``."""
    return [(f.stem, load_motion(str(f))) for f in sorted((config_dir() / "motions").glob("*.txt"))]


def run(args: argparse.Namespace) -> int:
    motions = ([(Path(f).stem, load_motion(f)) for f in args.eval_motion] if args.eval_motion
               else default_eval_motions())
    if args.population:
        return _population(args, args.out or Path("gaponet_population.onnx"), motions)
    shipped = args.profile == "default" and args.refine is None
    out = args.out or (models_dir() / "gaponet_so101_default.onnx" if shipped else
                       Path(f"gaponet_{Path(args.profile).stem}.onnx"))
    if args.refine is not None:
        settings = RefineSettings(max_episodes=max(args.max_episodes, _REFINE.min_episodes),
                                  epochs=args.epochs or _REFINE.epochs, seed=args.seed)
        print(f"refining {args.refine} for {args.profile} with {args.duration:g} s excitation episodes until validation "
              f"stops improving (at most {settings.max_episodes}), judged on {', '.join(n for n, _ in motions)}")
        report = refine_compensator(args.profile, args.refine, out, motions, settings, args.duration)
        print(f"wrote {out} ({report['episodes']} episodes, stopped: {report['stopped']}; {report['refine_s']} s) "
              f"and {out.with_suffix('.json')}")
        final = report["evaluations"][-1]
    else:
        recipe = Recipe(episodes=args.episodes or _RECIPE.episodes, duration=args.duration,
                        epochs=args.epochs or _RECIPE.epochs, seed=args.seed)
        print(f"training a compensator for {args.profile}: {recipe.episodes} excitation motions of "
              f"{recipe.duration:g} s, judged on {', '.join(n for n, _ in motions)}")
        report = train_compensator(args.profile, out, motions, recipe, args.eval_profile)
        print(f"wrote {out} ({report['collect_s']} s collecting, {report['train_s']} s training) and {out.with_suffix('.json')}")
        final = report["evaluations"][0]
    for evaluation in report["evaluations"]:
        print("\n" + format_table(evaluation))
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
