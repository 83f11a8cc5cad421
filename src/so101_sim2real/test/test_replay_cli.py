"""``so101 replay --sim mujoco``: bag and SAGE outputs read back with independent readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from so101_common import sage
from so101_common.joints import JOINT_NAMES, gripper_fraction_to_rad
from so101_gaponet.model_file import read_metadata
from so101_testing import run_cli

REPLAY_CLI = "so101_sim2real.cli.replay"  # what `so101 replay` runs
FIXTURES = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
MOTION = FIXTURES / "motion_files" / "so101" / "custom" / "actuator_bandwidth.txt"
REAL_RUN = FIXTURES / "output" / "real" / "so101" / "custom" / "prbs_excitation"
MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"


def motion_targets() -> np.ndarray:
    """The motion file parsed here, not through sage.py: SAGE order = joint order, jaw 0..1."""
    rows = np.loadtxt(MOTION, delimiter=",", skiprows=1)
    rows[:, -1] = [gripper_fraction_to_rad(v) for v in rows[:, -1]]
    return rows


def test_motion_to_bag_follows_the_commands(tmp_path: Path) -> None:
    out = tmp_path / "sim_bag"
    assert run_cli(REPLAY_CLI, ["--sim", "mujoco", "--motion", str(MOTION), "--out", str(out)]) == 0
    with AnyReader([out]) as reader:
        topics = {c.topic: c for c in reader.connections}
        assert set(topics) == {"/isaac_joint_command", "/isaac_joint_states"}
        states: list[Any] = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages([topics["/isaac_joint_states"]])]
        commands: list[Any] = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages([topics["/isaac_joint_command"]])]
    targets = motion_targets()
    assert len(commands) == len(targets)
    np.testing.assert_allclose(np.array([m.position for m in commands]), targets, atol=1e-12)
    stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in states])
    assert len(states) == int(round((len(targets) - 1) * 0.02 / 0.005)) + 1
    np.testing.assert_allclose(np.diff(stamps), 0.005, atol=1e-6)
    assert list(states[0].name) == list(JOINT_NAMES)
    position = np.array([m.position for m in states])
    effort = np.array([m.effort for m in states])
    np.testing.assert_allclose(position[0], targets[0], atol=1e-9)  # starts at the first frame
    # the sim follows the commands: within a few frames of lag it stays near the target
    command_at = targets[np.minimum((stamps / 0.02).astype(int), len(targets) - 1)]
    assert np.abs(position - command_at).max() < 0.15
    assert np.abs(position[-1] - targets[-1]).max() < 0.05
    assert np.isfinite(effort).all() and np.abs(effort).max() > 0


def test_sage_real_to_sage_sim_folder_with_delta_model(tmp_path: Path) -> None:
    plain, compensated = tmp_path / "sim" / "plain", tmp_path / "sim" / "delta"
    assert run_cli(REPLAY_CLI, ["--sage-real", str(REAL_RUN), "--out", str(plain), "--format", "sage"]) == 0
    assert run_cli(REPLAY_CLI, ["--sage-real", str(REAL_RUN), "--out", str(compensated), "--format", "sage",
                  "--delta-model", str(MODEL)]) == 0
    real_command, real_state = sage.run_to_trajectories(sage.read_run(REAL_RUN, kind="real"))
    for folder in (plain, compensated):
        assert sorted(p.name for p in folder.iterdir()) == ["control.csv", "joint_list.txt", "state_motor.csv"]
        run = sage.read_run(folder, kind="sim")
        assert run.state_time[0] == 0.0
        np.testing.assert_allclose(np.diff(run.state_time), 0.005, atol=1e-9)
        _, state = sage.run_to_trajectories(run)
        first = [np.interp(real_command.time[0], real_state.time, real_state.position[:, j]) for j in range(6)]
        np.testing.assert_allclose(state.position[0], first, atol=1e-9)  # starts from the real initial state
    plain_command, _ = sage.run_to_trajectories(sage.read_run(plain, kind="sim"))
    delta_command, _ = sage.run_to_trajectories(sage.read_run(compensated, kind="sim"))
    np.testing.assert_allclose(plain_command.position, real_command.position, atol=1e-9)
    # one applied command per 50 Hz control tick (the model's rate), each the held command + a bounded Δ
    np.testing.assert_allclose(np.diff(delta_command.time), 0.02, atol=1e-6)
    held = np.searchsorted(plain_command.time - plain_command.time[0], delta_command.time + 1e-9, side="right") - 1
    delta = delta_command.position - plain_command.position[held]
    bounds = np.asarray(read_metadata(MODEL).delta_bounds)
    assert np.abs(delta).max() > 1e-4
    assert (np.abs(delta) <= bounds + 1e-9).all()

def test_errors_are_one_line_and_keep_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(REPLAY_CLI, ["--motion", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")]) == 1
    assert "so101 replay: error:" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err
