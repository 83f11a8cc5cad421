"""JointTrajectory: shapes, defaults, reordering, slicing and time shifts; rows interpolated at times."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES, JointSpecError
from so101_common.trajectory import JointTrajectory, causal_velocity, rows_at


def _trajectory(n: int = 5) -> JointTrajectory:
    time = np.arange(n) * 0.02
    position = np.arange(n * 6, dtype=float).reshape(n, 6)
    return JointTrajectory(time, position, velocity=position * 10, effort=position * 100)


def test_defaults_fill_unmeasured_with_nan() -> None:
    traj = JointTrajectory([0.0, 0.1], np.zeros((2, 6)))
    assert traj.names == JOINT_NAMES
    assert traj.velocity.shape == traj.effort.shape == (2, 6)
    assert np.isnan(traj.velocity).all() and np.isnan(traj.effort).all()
    assert traj.position.dtype == np.float64 and traj.time.dtype == np.float64


def test_length_and_duration() -> None:
    traj = _trajectory(5)
    assert len(traj) == 5
    assert traj.duration == pytest.approx(0.08)
    assert JointTrajectory(np.zeros(0), np.zeros((0, 6))).duration == 0.0


def test_time_is_flattened() -> None:
    traj = JointTrajectory([[0.0], [1.0]], np.zeros((2, 6)))
    assert traj.time.shape == (2,)


@pytest.mark.parametrize(("field", "shape"), [("position", (3, 5)), ("velocity", (2, 6)), ("effort", (3,))])
def test_shape_errors_name_the_field(field: str, shape: tuple[int, ...]) -> None:
    kwargs: dict[str, Any] = {"position": np.zeros((3, 6)), field: np.zeros(shape)}
    with pytest.raises(JointSpecError, match=f"{field} has shape"):
        JointTrajectory(np.zeros(3), **kwargs)


def test_custom_names_set_the_width() -> None:
    traj = JointTrajectory([0.0], [[1.0, 2.0]], names=["elbow_flex", "gripper"])
    assert traj.names == ("elbow_flex", "gripper")
    assert traj.velocity.shape == (1, 2)


def test_reordered_moves_every_array() -> None:
    traj = _trajectory()
    names = tuple(reversed(JOINT_NAMES))
    back = traj.reordered(names)
    assert back.names == names
    np.testing.assert_array_equal(back.position, traj.position[:, ::-1])
    np.testing.assert_array_equal(back.velocity, traj.velocity[:, ::-1])
    np.testing.assert_array_equal(back.effort, traj.effort[:, ::-1])
    np.testing.assert_array_equal(back.reordered().position, traj.position)
    sub = traj.reordered(("gripper",))
    np.testing.assert_array_equal(sub.position[:, 0], traj.position[:, 5])


def test_reordered_missing_joint() -> None:
    traj = JointTrajectory([0.0], [[1.0]], names=["gripper"])
    with pytest.raises(JointSpecError, match="lacks joints"):
        traj.reordered()


def test_slice_time_is_inclusive() -> None:
    traj = _trajectory(5)
    part = traj.slice_time(0.02, 0.06)
    np.testing.assert_allclose(part.time, [0.02, 0.04, 0.06])
    np.testing.assert_array_equal(part.effort, traj.effort[1:4])
    assert len(traj.slice_time(1.0, 2.0)) == 0


def test_shifted_keeps_samples() -> None:
    traj = _trajectory(3)
    moved = traj.shifted(10.0)
    np.testing.assert_allclose(moved.time, traj.time + 10.0)
    np.testing.assert_array_equal(moved.position, traj.position)
    np.testing.assert_array_equal(traj.time, np.arange(3) * 0.02)  # the original is untouched


def test_causal_velocity_is_the_backward_difference() -> None:
    time = np.array([0.0, 0.5, 1.5])
    position = np.array([[0.0, 1.0], [1.0, 1.0], [3.0, 0.0]])
    np.testing.assert_allclose(causal_velocity(position, time), [[0.0, 0.0], [2.0, 0.0], [2.0, -1.0]])


def test_rows_at_interpolates_every_joint_as_np_interp_does_each() -> None:
    rng = np.random.default_rng(3)
    time = np.cumsum(rng.uniform(0.005, 0.05, 40))
    rows = rng.standard_normal((40, 6))
    when = np.concatenate(([time[0] - 1.0, time[0], time[-1], time[-1] + 2.0], time[7:9], rng.uniform(time[0], time[-1], 50)))
    expected = np.column_stack([np.interp(when, time, rows[:, j]) for j in range(6)])  # held at both ends
    np.testing.assert_allclose(rows_at(when, time, rows), expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(rows_at(when[:3], time[:1], rows[:1]), np.repeat(rows[:1], 3, axis=0))  # one row: held
