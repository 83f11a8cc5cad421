"""Train compensators on virtual arms in simulated time and judge them on arms and motions they never saw.

The recipes behind ``so101 train-compensator``, each writing a model and a JSON report beside it:

- :func:`train_population_compensator` (experimental: one model for a population of arms; not shipped):
  excitation on a population of arms drawn from the gap-profile schema (:mod:`so101_virtual.population`,
  the training seeds) → the population compensator (:mod:`so101_gaponet.train_population`) → closed-loop
  evaluation on arms drawn from the test seeds and on the given arms, on the evaluation motions, and the
  feed-forward's stability on every arm, trained on and held out;
- :func:`refine_compensator`: a model (the shipped per-arm one, or a population model) refined on one arm with as
  many excitation episodes as its validation asks for (:mod:`so101_gaponet.refine`), judged before and after on the evaluation motions;
- :func:`train_compensator`: one arm's own model from scratch (``joint_mlp``) on a fixed number of excitation
  episodes (``models/gaponet_so101_default.onnx``, the shipped default, is ``default``'s).

Evaluation is real-vs-sim position RMSE per joint without and with the compensator (:mod:`.harness`).
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from so101_apps.compensation.harness import (
    MotionResult,
    ServoFault,
    evaluate,
    excitation_dataset,
    pooled,
    stability,
)
from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_common.paired_dataset import PairedDataset
from so101_common.trajectory import JointTrajectory
from so101_gaponet.excitation import excitation_motion
from so101_gaponet.export import train_and_export, write_and_check
from so101_gaponet.model_file import load_model
from so101_gaponet.refine import Refinement, RefineSettings, trainer_from_file
from so101_gaponet.train_population import PopulationConfig, train_population
from so101_virtual.population import TEST_SEEDS, TRAIN_SEEDS, ArmPopulation
from so101_virtual.profiles import GapProfile, load_profile, profile_to_dict

__all__ = ["Recipe", "PopulationRecipe", "train_compensator", "train_population_compensator", "refine_compensator",
           "format_table", "format_distribution", "arm_datasets", "distribution"]


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


ENCODER_STEP = 0.0015  # rad: one encoder count, the smallest change a reading can show


def distribution(evaluations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Over the arms of ``evaluations``, per joint: the median and the worst of each arm's pooled cut (%), and
    over every arm × motion: the worst cut, how many got worse and how many by more than an encoder count;
    the servo faults (uncompensated: the arm cannot play that motion; compensated: a failure)."""
    out: dict[str, Any] = {"arms": len(evaluations), "joints": {}, "faults": []}
    for joint in JOINT_NAMES:
        cuts = [e["pooled"][joint]["cut_percent"] for e in evaluations if e["pooled"][joint]["before"] == e["pooled"][joint]["before"]]
        motions = [m["joints"][joint] for e in evaluations for m in e["motions"] if not m["fault"]]
        worse = [m for m in motions if m["after"] > m["before"]]
        out["joints"][joint] = {
            "median_cut_percent": float(np.median(cuts)) if cuts else math.nan,
            "worst_cut_percent": float(np.min(cuts)) if cuts else math.nan,
            "worst_motion_cut_percent": float(min(m["cut_percent"] for m in motions)) if motions else math.nan,
            "arm_motions": len(motions), "worse": len(worse),
            "worse_by_more_than_an_encoder_step": sum(m["after"] - m["before"] > ENCODER_STEP for m in worse)}
    out["faults"] = [f"{e['profile']} / {m['motion']}: {m['fault']}" for e in evaluations for m in e["motions"] if m["fault"]]
    return out


def format_distribution(summary: dict[str, Any]) -> str:
    """The distribution as printed lines."""
    short = {"shoulder_pan": "pan", "shoulder_lift": "lift", "elbow_flex": "elbow", "wrist_flex": "w.flex",
             "wrist_roll": "w.roll", "gripper": "grip"}
    joints = summary["joints"]
    lines = [f"over {summary['arms']} held-out arms (pooled over the motions per arm), cut %:",
             f"{'':>34}" + "".join(f"{short[n]:>8}" for n in JOINT_NAMES)]
    for key, label in (("median_cut_percent", "median over arms"), ("worst_cut_percent", "worst arm"),
                       ("worst_motion_cut_percent", "worst arm × motion"), ("worse", "arm × motions worse"),
                       ("worse_by_more_than_an_encoder_step", "... by more than an encoder step")):
        lines.append(f"{label:>34}" + "".join(f"{joints[n][key]:8.0f}" for n in JOINT_NAMES))
    lines += [f"servo fault: {fault}" for fault in summary["faults"]]
    return "\n".join(lines)


@dataclass(frozen=True)
class PopulationRecipe:
    """How many arms, how much excitation each, how much training, how many held-out arms."""

    arms: int = 128  # training arms: the population's training seeds 0 … arms − 1 (measured: 64 → 128 raised the
    # validation arms' median by 2–5 points on pan, lift and elbow)
    episodes: int = 2  # excitation motions per arm
    duration: float = 30.0  # s per excitation motion
    epochs: int = 30
    seed: int = 0  # training seed
    eval_arms: int = 8  # held-out arms: the population's test seeds 2000 … 2000 + eval_arms − 1


def train_population_compensator(out: Path, eval_motions: Sequence[tuple[str, JointTrajectory]],
                                 recipe: PopulationRecipe = PopulationRecipe(),
                                 eval_profiles: Sequence[GapProfile | str] = (), data_folder: Path | None = None,
                                 config: PopulationConfig | None = None, progress: bool = True) -> dict[str, Any]:
    """Collect, train, write ``out`` (ONNX) and ``out.with_suffix('.json')`` (the report); return the report.

    ``eval_profiles``: further held-out arms (hand-built ones) judged beside the drawn ones. ``data_folder``:
    where the arms' excitation datasets are kept (reused by a later run with the same arms); default a
    temporary folder.
    """
    population = ArmPopulation()
    started = time.monotonic()
    say = print if progress else (lambda *_args, **_kwargs: None)
    say(f"drawing {recipe.arms} training arms from the population around {population.base}")
    arms = [population.draw(seed) for seed in TRAIN_SEEDS[:recipe.arms]]
    with tempfile.TemporaryDirectory(prefix="so101_population_") as scratch:
        datasets = arm_datasets(arms, recipe.episodes, recipe.duration, data_folder or Path(scratch), progress)
        collected = time.monotonic() - started
        settings = config or PopulationConfig(epochs=recipe.epochs, seed=recipe.seed, progress=progress)
        result = train_population(datasets, settings, provenance={
            "command": "so101 train-compensator", "recipe": asdict(recipe), "population": asdict(population),
            "train_arms": [d.metadata.get("profile", "") for d in datasets]})
    trained = time.monotonic() - started - collected
    error = write_and_check(result.module, result.metadata, out, "onnx")
    if error > 1e-4:
        raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
    model = load_model(out)
    held_out = [population.draw(seed) for seed in TEST_SEEDS[:recipe.eval_arms]] + [load_profile(p) for p in eval_profiles]
    say(f"judging on {len(held_out)} held-out arms × {len(eval_motions)} motions ({', '.join(n for n, _ in eval_motions)})")
    evaluations = []
    for arm in held_out:
        evaluations.append(_evaluation(arm.name, evaluate(arm, eval_motions, model)))
        say(_cut_line(evaluations[-1]), flush=True)
    kept = {d.metadata.get("profile") for d in datasets}  # the working arms (the others were left out)
    trained_arms = [a for a in arms if a.name in kept]
    stabilities = [stability(arm, model).to_dict() for arm in [*trained_arms, *held_out]]
    report: dict[str, Any] = {
        "model": str(out), "recipe": asdict(recipe), "population": asdict(population),
        "train_arms": [a.name for a in trained_arms], "held_out_arms": [a.name for a in held_out],
        "held_out_motions": [n for n, _ in eval_motions], "collect_s": round(collected, 1), "train_s": round(trained, 1),
        "training": {"initial_validation_loss": result.initial_validation_loss,
                     "validation_loss": result.validation_losses[-1], "export_max_abs_error": error},
        "distribution": distribution(evaluations), "evaluations": evaluations,
        "stability": {"settled": sum(s["settled"] for s in stabilities if s["judged"]),
                      "arms": sum(s["judged"] for s in stabilities),
                      "not_judged": [s["profile"] for s in stabilities if not s["judged"]],
                      "unsettled": [s["profile"] for s in stabilities if not s["settled"]], "per_arm": stabilities}}
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _cut_line(evaluation: dict[str, Any]) -> str:
    cuts = " ".join(f"{evaluation['pooled'][n]['cut_percent']:5.0f}" for n in JOINT_NAMES)
    faults = [m["motion"] for m in evaluation["motions"] if m["fault"]]
    return f"   {evaluation['profile']:>18}: {cuts} %" + (f" (servo fault on {', '.join(faults)})" if faults else "")


def refine_compensator(profile: GapProfile | str, start: Path, out: Path, eval_motions: Sequence[tuple[str, JointTrajectory]],
                       settings: RefineSettings | None = None, duration: float = 30.0,
                       progress: bool = True) -> dict[str, Any]:
    """Refine the model ``start`` (a per-arm compensator such as the shipped one, or a population model) on
    ``profile``'s excitation until its validation stops improving (``settings``: default :class:`RefineSettings`),
    write ``out`` and its report, and judge both models on the evaluation motions."""
    arm = load_profile(profile)
    settings = settings or RefineSettings()
    started = time.monotonic()
    refinement = Refinement(trainer_from_file(start, settings), settings)
    while not refinement.done:
        index = len(refinement.steps)
        name = f"excitation-{index}"
        episode = excitation_dataset(arm, [excitation_motion(index, duration)], [name], seed=index)
        step = refinement.add(episode)
        if progress:
            print(step.line(name), flush=True)
    refined = time.monotonic() - started
    error = write_and_check(refinement.model.module, refinement.model.metadata, out, "onnx")
    if error > 1e-4:
        raise RuntimeError(f"exported model differs from the trained one by {error:.2e}")
    report: dict[str, Any] = {
        "profile": arm.name, "model": str(out), "start": str(start), "refine_s": round(refined, 1),
        "settings": asdict(settings), "episodes": len(refinement.steps),
        "steps": [asdict(s) for s in refinement.steps], "stopped": refinement.steps[-1].stop,
        "evaluations": [_evaluation(f"{arm.name} (start model)", evaluate(arm, eval_motions, load_model(start))),
                        _evaluation(arm.name, evaluate(arm, eval_motions, load_model(out)))]}
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    return report


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


def arm_datasets(arms: Sequence[GapProfile], episodes: int, duration: float, folder: Path,
                 progress: bool = True) -> list[PairedDataset]:
    """Per arm, ``episodes`` excitation motions played uncompensated and paired with the MuJoCo replay, saved
    under ``folder/<arm name>`` (reused when already there for the same arm and episodes). Arm ``k``'s motions are
    excitation seeds ``1000 + k·episodes …`` for the arm's seed ``k`` (disjoint from the per-arm recipe's
    0 … episodes − 1 and from one arm to the next). An arm whose servo protection trips on its excitation is
    left out (faults are not gaps; :func:`so101_virtual.population.working` misses a few such arms)."""
    datasets = []
    for arm in arms:
        path = folder / arm.name
        first = 1000 + arm.seed * episodes
        names = [f"excitation-{seed}" for seed in range(first, first + episodes)]
        digest = hashlib.sha256(json.dumps([profile_to_dict(arm), duration], sort_keys=True).encode()).hexdigest()[:16]
        if (path / "dataset.json").is_file():
            cached = PairedDataset.load(path)
            if [e.name for e in cached.episodes] == names and cached.metadata.get("arm_digest") == digest:
                datasets.append(cached)
                continue
        started = time.monotonic()
        motions = [excitation_motion(seed, duration) for seed in range(first, first + episodes)]
        try:
            dataset = excitation_dataset(arm, motions, names, seed=first)
        except ServoFault as fault:
            if progress:
                print(f"   {arm.name}: left out, not a working arm ({fault})", flush=True)
            continue
        dataset.metadata["arm_digest"] = digest
        dataset.save(path)
        datasets.append(PairedDataset.load(path))
        if progress:
            print(f"   {arm.name}: {episodes} × {duration:g} s of excitation in {time.monotonic() - started:.1f} s", flush=True)
    return datasets
