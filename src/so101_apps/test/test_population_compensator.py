"""Held-out claims of the shipped population compensator and of per-arm refinement, in simulated time with fixed
seeds: on arms it was never trained on (drawn from the population's test seeds, and the hand-built slow bus)
and on a real SAGE motion it never saw, each arm joint's gap to the MuJoCo replay is cut by at least the
figure below. A compensator whose Δ is 0 cuts nothing and fails each of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_apps.compensation.harness import evaluate, pooled
from so101_apps.compensation.recipe import refine_compensator
from so101_bringup.share import config_dir, models_dir
from so101_common.joints import ARM_JOINT_NAMES, JOINT_NAMES
from so101_common.sage import read_motion_file
from so101_common.trajectory import JointTrajectory
from so101_gaponet.model_file import load_model
from so101_gaponet.refine import RefineSettings
from so101_virtual.population import TEST_SEEDS, ArmPopulation
from so101_virtual.profiles import GapProfile, load_profile

SHIPPED = models_dir() / "gaponet_so101_default.onnx"
POPULATION_CUT = 50.0  # % per arm joint
REFINED_CUT = 60.0  # % per arm joint


def _held_out_motion() -> list[tuple[str, JointTrajectory]]:
    """chirp_sweep's first 15 s (a real SO-101 motion; training uses excitation motions only)."""
    full = read_motion_file(config_dir() / "motions" / "chirp_sweep.txt")
    return [("chirp_sweep", JointTrajectory(full.time[:750], full.position[:750], names=JOINT_NAMES))]


def _cuts(profile: GapProfile, model_path: Path) -> dict[str, float]:
    results = evaluate(profile, _held_out_motion(), load_model(model_path))
    assert not any(r.fault for r in results), [r.fault for r in results]
    return {joint: result.cut_percent for joint, result in pooled(results).items()}


@pytest.mark.parametrize("arm", [f"population~{TEST_SEEDS[0]}", "slow_bus"])
def test_the_shipped_population_model_cuts_every_arm_joint_on_an_arm_it_never_saw(arm: str) -> None:
    profile = ArmPopulation().draw(TEST_SEEDS[0]) if arm.startswith("population") else load_profile(arm)
    assert load_model(SHIPPED).metadata.model_kind == "context_mlp"
    cuts = _cuts(profile, SHIPPED)
    assert all(cuts[j] >= POPULATION_CUT for j in ARM_JOINT_NAMES), cuts


def test_refinement_on_an_arm_it_never_saw_cuts_every_arm_joint(tmp_path: Path) -> None:
    profile = load_profile("weak_gains")
    report = refine_compensator(profile, SHIPPED, tmp_path / "weak.onnx", _held_out_motion(),
                                RefineSettings(max_episodes=3, epochs=15), duration=15.0, progress=False)
    assert 2 <= report["episodes"] <= 3 and report["stopped"]
    refined = report["evaluations"][1]["pooled"]
    cuts = {j: refined[j]["cut_percent"] for j in ARM_JOINT_NAMES}
    assert all(c >= REFINED_CUT for c in cuts.values()), cuts
    assert np.isfinite(list(cuts.values())).all()
