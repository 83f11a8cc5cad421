"""MuJoCo backend: determinism, servo tracking, gravity hold, timing on the command's clock, filters."""

from __future__ import annotations

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.trajectory import JointTrajectory
from so101_sim2real.replay.mujoco_backend import (
    DEFAULT_KP,
    MujocoSim,
    MujocoSimConfig,
    MujocoSimError,
    replay_trajectory,
)

PAN, LIFT, ELBOW = (JOINT_NAMES.index(n) for n in ("shoulder_pan", "shoulder_lift", "elbow_flex"))


def hold(target: list[float], seconds: float, t0: float = 0.0, rate: float = 50.0) -> JointTrajectory:
    time = t0 + np.arange(round(seconds * rate) + 1) / rate
    return JointTrajectory(time, np.tile(target, (len(time), 1)))


@pytest.fixture(scope="module")
def sim() -> MujocoSim:
    return MujocoSim()


def test_replay_is_deterministic(sim: MujocoSim) -> None:
    time = np.arange(0, 2.0, 0.02)
    command = np.zeros((len(time), len(JOINTS)))
    command[:, LIFT] = 0.4 * np.sin(3 * time)
    command[:, ELBOW] = 0.3 * np.sin(5 * time)
    trajectory = JointTrajectory(time, command)
    first = sim.simulate(trajectory, command[0])
    second = MujocoSim().simulate(trajectory, command[0])
    for name in ("time", "position", "velocity", "effort"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert np.isfinite(first.effort).all()


def test_step_command_converges_to_target(sim: MujocoSim) -> None:
    target = [0.5, 0.0, 0.0, 0.3, -0.6, 0.8]
    out = sim.simulate(hold(target, 2.0), initial_position=np.zeros(len(JOINTS)))
    np.testing.assert_allclose(out.position[0], 0.0, atol=1e-12)  # starts at the given state
    np.testing.assert_allclose(out.position[-1], target, atol=0.02)
    np.testing.assert_allclose(out.velocity[-1], 0.0, atol=0.05)
    # the step really moved the arm: half-way there within the first half second
    halfway = np.searchsorted(out.time, 0.5)
    assert abs(out.position[halfway, PAN] - 0.5) < 0.25


def test_gravity_hold_matches_servo_law() -> None:
    pose = [0.0, 0.6, -0.4, 0.3, 0.0, 0.0]
    loaded = MujocoSim().simulate(hold(pose, 2.0), pose)
    floating = MujocoSim(MujocoSimConfig(gravity=False)).simulate(hold(pose, 2.0), pose)
    # holds the pose; at rest the servo torque is kp · (target − q) (P law) and carries the arm's weight
    np.testing.assert_allclose(loaded.position[-1], pose, atol=0.01)
    expected = DEFAULT_KP * (np.asarray(pose) - loaded.position[-1])
    np.testing.assert_allclose(loaded.effort[-1], expected, atol=0.02)
    assert abs(loaded.effort[-1, LIFT]) > 0.05
    np.testing.assert_allclose(floating.effort[-1], 0.0, atol=0.01)


def test_replay_trajectory_is_stamped_on_the_command_clock() -> None:
    pose = [0.1, 0.2, 0.3, 0.0, 0.0, 0.5]
    command = hold(pose, 0.5, t0=1_700_000_000.25)
    out = replay_trajectory(command, initial_position=np.array(pose))
    assert out.time[0] == command.time[0]
    assert out.time[-1] == pytest.approx(command.time[-1], abs=1e-6)
    np.testing.assert_allclose(np.diff(out.time), 0.005, atol=1e-6)
    assert out.names == JOINT_NAMES


def test_control_rate_filter_sees_each_tick_and_shifts_the_target() -> None:
    config = MujocoSimConfig(control_rate_hz=50.0)
    pose = [0.0, 0.2, 0.2, 0.0, 0.0, 0.0]
    calls: list[float] = []

    def offset(time: float, target: np.ndarray, position: np.ndarray, velocity: np.ndarray) -> np.ndarray:
        calls.append(time)
        assert position.shape == velocity.shape == (len(JOINTS),)
        return target + np.array([0.2, 0, 0, 0, 0, 0])

    out = MujocoSim(config).simulate(hold(pose, 1.0), pose, command_filter=offset)
    np.testing.assert_allclose(np.diff(calls), 0.02, atol=1e-9)  # once per 50 Hz control tick
    assert out.position[-1, PAN] == pytest.approx(0.2, abs=0.02)
    sparse = MujocoSim(MujocoSimConfig(control_rate_hz=50.0, sample="control")).simulate(hold(pose, 1.0), pose)
    np.testing.assert_allclose(np.diff(sparse.time), 0.02, atol=1e-9)


def test_bridge_face_reset_and_step_command() -> None:
    sim = MujocoSim(MujocoSimConfig(gravity=False))
    sim.reset([0.0] * 6)
    sim.step_command([0.0, 0.0, 0.5, 0.0, 0.0, 0.0], steps=400)
    assert sim.time == pytest.approx(2.0)
    assert sim.position()[ELBOW] == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("kwargs", [{"physics_dt": 0.0}, {"kp": (1.0, 2.0)}, {"kd": -1.0},
                                    {"control_rate_hz": 1000.0}, {"sample": "sometimes"},
                                    {"start_position": (0.0,)}])
def test_bad_config_is_refused(kwargs: dict) -> None:
    with pytest.raises(MujocoSimError):
        MujocoSimConfig(**kwargs)


def test_bad_commands_are_refused(sim: MujocoSim) -> None:
    command = hold([0.0] * 6, 0.2)
    command.position[3, 1] = np.nan
    with pytest.raises(MujocoSimError, match="NaN"):
        sim.simulate(command, np.zeros(6))
    with pytest.raises(MujocoSimError, match="finite"):
        sim.simulate(hold([0.0] * 6, 0.2), np.zeros(5))
