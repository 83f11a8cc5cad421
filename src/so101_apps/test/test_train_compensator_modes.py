"""``so101 train-compensator``'s experimental modes end to end, at toy size: a population model trained on arms
drawn from the population and judged on a held-out one, then refined on an arm it never saw. (What they
achieve at full size is measured in docs/research/gaponet.md, not here.)"""

from __future__ import annotations

import json
from pathlib import Path

from so101_bringup.share import config_dir, models_dir
from so101_common.joints import JOINT_NAMES
from so101_common.sage import read_motion_file, write_motion_file
from so101_common.trajectory import JointTrajectory
from so101_gaponet.model_file import load_model
from so101_testing import run_cli

CLI = "so101_apps.train_compensator"
TOY = ["--duration", "5", "--epochs", "2"]


def _short_motion(folder: Path) -> Path:
    """chirp_sweep's first 5 s (a real SO-101 motion; training uses excitation motions only)."""
    full = read_motion_file(config_dir() / "motions" / "chirp_sweep.txt")
    path = folder / "chirp5.txt"
    write_motion_file(JointTrajectory(full.time[:250], full.position[:250], names=JOINT_NAMES), path)
    return path


def test_a_population_model_is_trained_judged_held_out_and_refined_on_an_arm_it_never_saw(tmp_path: Path) -> None:
    motion = _short_motion(tmp_path)
    population = tmp_path / "pop.onnx"
    status = run_cli(CLI, ["--population", "--arms", "2", "--eval-arms", "1", "--episodes", "1", *TOY,
                           "--eval-motion", str(motion), "--out", str(population)])
    report = json.loads(population.with_suffix(".json").read_text())
    assert len(report["train_arms"]) == 2 and all(a.startswith("population~") for a in report["train_arms"])
    assert report["held_out_arms"] == ["population~2000"] and report["held_out_motions"] == ["chirp5"]
    assert report["stability"]["arms"] + len(report["stability"]["not_judged"]) == 3  # trained and held-out arms
    worse = any(e["pooled"][n]["cut_percent"] < 0 for e in report["evaluations"] for n in JOINT_NAMES)
    assert status == int(worse or bool(report["stability"]["unsettled"]))  # exit 1 exactly when not fit to ship
    assert load_model(population).metadata.model_kind == "context_mlp"

    refined = tmp_path / "weak.onnx"
    status = run_cli(CLI, ["--profile", "weak_gains", "--refine", str(population), "--max-episodes", "2", *TOY,
                           "--eval-motion", str(motion), "--out", str(refined)])
    record = json.loads(refined.with_suffix(".json").read_text())
    assert record["episodes"] == 2 and record["stopped"]  # the cap, or enough already at the second
    assert [e["profile"] for e in record["evaluations"]] == ["weak_gains (start model)", "weak_gains"]
    worse = any(record["evaluations"][-1]["pooled"][n]["cut_percent"] < 0 for n in JOINT_NAMES)
    assert status == int(worse)
    assert load_model(refined).metadata.provenance["refinement_episodes"] == 2


def test_the_shipped_model_is_refined_on_an_arm_it_never_saw(tmp_path: Path) -> None:
    """``--refine`` with a per-arm model: the arm's own model starts from it, collecting until validation stops
    improving (what ``so101 demo`` does through ROS)."""
    motion = _short_motion(tmp_path)
    refined = tmp_path / "worn.onnx"
    status = run_cli(CLI, ["--profile", "worn", "--refine", str(models_dir() / "gaponet_so101_default.onnx"),
                           "--max-episodes", "2", *TOY, "--eval-motion", str(motion), "--out", str(refined)])
    record = json.loads(refined.with_suffix(".json").read_text())
    # the start model judges the first episode, so the second is already a comparison
    assert record["episodes"] == 2 and record["steps"][0]["loss"] is not None and record["stopped"]
    assert [e["profile"] for e in record["evaluations"]] == ["worn (start model)", "worn"]
    worse = any(record["evaluations"][-1]["pooled"][n]["cut_percent"] < 0 for n in JOINT_NAMES)
    assert status == int(worse)
    metadata = load_model(refined).metadata
    assert metadata.model_kind == "joint_mlp" and metadata.provenance["started_from"]["profile"] == "default"
