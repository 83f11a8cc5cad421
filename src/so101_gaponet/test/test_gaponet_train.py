"""Training learns a gap with a known answer: the inverse of a first-order-lag arm.

For the ``lag`` profile the real arm obeys ``q[t+1] = q[t] + α (u[t] − q[t])``, so the command that
reaches ``y`` one step later is ``u = q + (y − q)/α`` and the right Δ is ``(y − q)(1/α − 1)``:
it leads the command by a known factor.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import DatasetError, PairedDataset
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.export import train_and_export
from so101_gaponet.model_file import load_model
from so101_gaponet.synthetic import PROFILES, make_command, make_dataset, simulate_real
from so101_gaponet.train import TrainConfig, TrainingError, build_samples, train

ALPHA = 1 - math.exp(-0.02 / PROFILES["lag"].lag_s)


def test_samples_follow_the_documented_objective(lag_dataset: Path) -> None:
    history, rows, delta = build_samples(PairedDataset.load(lag_dataset), history=2, horizon=1)
    q_now = history[:, -1, :6]
    # first-order lag q' = q + α(u − q): the command that produced q_{t+1} is q_t + (q_{t+1} − q_t)/α
    np.testing.assert_allclose(delta, (rows[:, 0] - q_now) * (1 / ALPHA - 1), atol=1e-9)
    # Horizon K: the command rows are the real trajectory q_{t+1} … q_{t+K}, Δ = command_t − q_{t+1}.
    episode = PairedDataset.load(lag_dataset).episodes[0]
    history, rows, delta = build_samples(PairedDataset.load(lag_dataset), history=2, horizon=5)
    q, command = episode.real_position, episode.command
    assert rows.shape[1:] == (5, 6)
    np.testing.assert_allclose(rows[0], q[2:7], atol=1e-12)  # t = 1 (second row of history)
    np.testing.assert_allclose(delta[0], command[1] - q[2], atol=1e-12)


def test_samples_touching_a_fault_span_are_left_out(lag_dataset: Path) -> None:
    dataset = PairedDataset.load(lag_dataset)
    clean_history, _, _ = build_samples(dataset, history=2, horizon=5)
    episode = dataset.episodes[0]
    start, end = float(episode.time[100]), float(episode.time[149])  # 50 faulted samples
    episode.metadata["faults"] = [{"joint": "elbow_flex", "fault": "overload", "start": start, "end": end}]
    history, rows, _ = build_samples(dataset, history=2, horizon=5)
    # every window (2 history rows + 5 rows ahead) that overlaps samples 100..149 goes: 50 + 2 + 5 − 1
    assert len(clean_history) - len(history) == 56
    faulted = episode.real_position[100:150]
    assert not any(np.any(np.all(np.isclose(h[:, :6][:, None, :], faulted[None]), axis=2)) for h in history[:400])


def test_training_learns_the_known_inverse(lag_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "lag.onnx"
    figures = train_and_export([lag_dataset], out, "onnx", arch="mlp", history=2, horizon=1, epochs=25, hidden=32,
                               seed=0, delta_bound=1.0, delta_l2=0.0, feedback_gain=0.0, direction_play=0.0,
                               measured_inputs=True, progress=False)
    assert figures["validation_loss"] < figures["initial_validation_loss"]
    model = load_model(out, joints=JOINT_NAMES, rate_hz=50.0)
    provenance = model.metadata.provenance
    assert provenance["final_validation_loss"] < 0.05 * provenance["initial_validation_loss"]

    # Fresh episodes of the same arm: the learned Δ matches the closed-form inverse and leads the motion.
    fresh = PairedDataset.load(make_dataset(tmp_path / "fresh", profile="lag", episodes=1, seconds=8.0, seed=99))
    history, rows, known = build_samples(fresh, history=2, horizon=1)
    learned = np.array([model.delta(h, y) for h, y in zip(history, rows, strict=True)])
    r2 = 1 - np.sum((learned - known) ** 2) / np.sum((known - known.mean(axis=0)) ** 2)
    assert r2 > 0.9, r2
    moving = np.abs(known) > 0.02
    assert np.mean(np.sign(learned[moving]) == np.sign(known[moving])) > 0.95  # Δ leads: same sign as the motion


def test_compensated_arm_tracks_better(tmp_path: Path, lag_dataset: Path) -> None:
    # Horizon 1 without the Δ penalty: the exact one-step inverse, right for this exact arm (see the module doc).
    result = train([lag_dataset], TrainConfig(arch="deeponet", history=2, horizon=1, epochs=15, hidden=32, delta_bound=1.0,
                                              measured_inputs=True, feedback_gain=0.0,
                                              delta_l2=0.0, progress=False))
    from so101_gaponet.model_file import save_onnx

    model = load_model(save_onnx(result.module, result.metadata, tmp_path / "d.onnx"))
    command = make_command(250, 50.0, np.random.default_rng(5), amplitude=0.3)
    plain = simulate_real(command, 50.0, PROFILES["lag"])
    # this test's deployment raises its caps to the model's wide bounds (1 rad, 1/3 rad per step at 50 Hz)
    comp = Compensator(CompensatorConfig(joints=JOINT_NAMES, max_delta=1.0, max_delta_rate=50.0), model)
    # closed loop: the synthetic arm driven by the compensated command, one step at a time
    motor = command[0].copy()
    tracked = np.empty_like(command)
    for t in range(len(command)):
        tracked[t] = motor
        comp.update_measured(motor, None, stamp=t * 0.02)
        motor = motor + ALPHA * (comp.compensate(command[t]).command - motor)
    ideal = np.vstack([command[:1], command[:-1]])  # what the sim does: one step behind
    error_plain = np.sqrt(np.mean((plain[20:] - ideal[20:]) ** 2))
    error_comp = np.sqrt(np.mean((tracked[20:] - ideal[20:]) ** 2))
    assert error_comp < 0.5 * error_plain, (error_comp, error_plain)


def test_training_refuses_bad_settings_and_data(tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="unknown arch"):
        TrainConfig(arch="resnet")
    with pytest.raises(DatasetError):
        train_and_export([tmp_path / "nowhere"], tmp_path / "x.onnx", "onnx", arch="mlp", history=2, horizon=1,
                         epochs=1, hidden=8, progress=False)
    assert not (tmp_path / "x.onnx").exists()
