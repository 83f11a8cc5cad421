"""Scripted motions: inside the joint limits, at rest at both ends, sampled by interpolation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINTS, gripper_fraction_to_rad
from so101_common.trajectory import JointTrajectory
from so101_policy.motions import BUILTIN_MOTIONS, MotionError, builtin_motion, load_motion, sample, sample_times

SAGE_MOTION = (Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
               / "motion_files" / "so101" / "custom" / "single_joint_elbow.txt")


@pytest.mark.parametrize("name", BUILTIN_MOTIONS)
def test_builtin_motions_stay_inside_limits_and_start_and_end_at_rest(name: str) -> None:
    motion = builtin_motion(name, duration=6.0, rate_hz=50.0)
    assert motion.duration == pytest.approx(6.0, abs=0.02)
    lower = np.array([j.lower for j in JOINTS])
    upper = np.array([j.upper for j in JOINTS])
    assert np.all(motion.position >= lower) and np.all(motion.position <= upper)
    np.testing.assert_allclose(motion.position[0], 0.0, atol=1e-9)
    np.testing.assert_allclose(motion.position[-1], 0.0, atol=1e-3)
    step = np.abs(np.diff(motion.position, axis=0)).max() * 50.0  # rad/s
    assert step < 3.0, "a built-in motion must be smooth enough for the safety filter's default bounds"


def test_sweep_moves_every_joint() -> None:
    motion = builtin_motion("sweep", duration=12.0)
    assert np.all(np.ptp(motion.position, axis=0) > 0.3)


def test_sample_interpolates_and_holds_the_ends() -> None:
    motion = builtin_motion("sweep", duration=4.0, rate_hz=10.0)
    mid = 0.5 * (motion.position[5] + motion.position[6])
    np.testing.assert_allclose(sample(motion, 0.55), mid, atol=1e-12)
    np.testing.assert_allclose(sample(motion, -1.0), motion.position[0])
    np.testing.assert_allclose(sample(motion, 99.0), motion.position[-1])
    # many times at once (a chunk): row k is the motion at times[k], each joint interpolated as one
    times = np.array([0.55, -1.0, 99.0, 0.0])
    np.testing.assert_allclose(sample_times(motion, times), [mid, motion.position[0], motion.position[-1], motion.position[0]],
                               atol=1e-12)
    single = JointTrajectory(names=motion.names, time=motion.time[:1], position=motion.position[:1])
    np.testing.assert_array_equal(sample_times(single, np.array([-1.0, 0.0, 3.0])), np.repeat(motion.position[:1], 3, axis=0))


def test_load_motion_reads_sage_motion_files_and_rejects_unknown_sources(tmp_path: Path) -> None:
    motion = load_motion(str(SAGE_MOTION))
    first = np.array([float(v) for v in SAGE_MOTION.read_text().splitlines()[1].split(",")])
    np.testing.assert_allclose(motion.position[0, :5], first[:5])
    assert motion.position[0, 5] == pytest.approx(gripper_fraction_to_rad(first[5]))  # jaw 0..1 → rad
    with pytest.raises(MotionError, match="neither a built-in motion"):
        load_motion(str(tmp_path / "nope.txt"))
    with pytest.raises(MotionError):
        builtin_motion("dance")
