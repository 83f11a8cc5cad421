"""The synthetic paired dataset (written in the one paired-dataset format) and the shipped default model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import PairedDataset
from so101_common.trajectory import causal_velocity
from so101_gaponet import load_model
from so101_gaponet.synthetic import PROFILES, make_dataset, simulate_real
from so101_gaponet.train import TrainConfig

SHIPPED_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"  # the workspace's models/: tests run from the source tree


def test_synthetic_dataset_round_trip(tmp_path: Path) -> None:
    data = PairedDataset.load(make_dataset(tmp_path / "d", profile="default", episodes=2, seconds=2.0, seed=3))
    assert data.rate_hz == 50.0 and data.joint_names == JOINT_NAMES and data.metadata["profile"] == "default"
    episode = data.episodes[0]
    np.testing.assert_allclose(episode.real_position, simulate_real(episode.command, 50.0, PROFILES["default"]))
    np.testing.assert_allclose(episode.sim_position[1:], episode.command[:-1])
    np.testing.assert_allclose(episode.real_velocity, causal_velocity(episode.real_position, episode.time))
    assert np.isnan(episode.real_effort).all()


def test_synthetic_arm_shows_the_documented_gap() -> None:
    command = np.zeros((200, 6))
    command[50:, :] = 0.5  # a step on every joint
    real = simulate_real(command, 50.0, PROFILES["default"])
    lift, pan = JOINT_NAMES.index("shoulder_lift"), JOINT_NAMES.index("shoulder_pan")
    # τ = 100 ms at 50 Hz: five steps after the step the motor is at 1 − e⁻¹ of it, the link half a backlash behind
    assert abs(real[55, pan] - (0.5 * (1 - np.exp(-1)) - np.radians(0.5))) < 1e-3
    assert abs(real[-1, pan] - (0.5 - np.radians(0.5))) < 1e-3  # settles half the backlash short
    assert real[-1, lift] < real[-1, pan] - 0.01  # gravity sag on shoulder_lift


def test_shipped_model_fits_the_joint_spec_and_says_how_it_was_made() -> None:
    model = load_model(SHIPPED_MODEL, joints=JOINT_NAMES, rate_hz=50.0)
    meta = model.metadata
    defaults = TrainConfig()  # so101 train-compensator trains with the trainer's defaults
    assert meta.model_kind == defaults.arch and meta.history == defaults.history
    assert meta.future_steps == meta.horizon == defaults.horizon
    assert meta.feedback_gain == (defaults.feedback_gain,) * 6 and meta.direction_play == defaults.direction_play
    assert meta.provenance["profile"] == "default"
    assert meta.provenance["datasets"] == ["excitation"]
    assert meta.provenance["final_validation_loss"] < 0.1 * meta.provenance["initial_validation_loss"]
    assert SHIPPED_MODEL.stat().st_size < 2_000_000
