"""Excitation motions: inside the joint limits, below the velocity bound, at rest at both ends, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from so101_common.joints import JOINTS
from so101_gaponet.excitation import excitation_motion


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_within_limits_and_velocity_bound_starting_and_ending_at_zero(seed: int) -> None:
    motion = excitation_motion(seed, duration=20.0, max_velocity=1.5)
    lower = np.array([spec.lower for spec in JOINTS])
    upper = np.array([spec.upper for spec in JOINTS])
    assert np.all(motion.position >= lower) and np.all(motion.position <= upper)
    speed = np.abs(np.diff(motion.position, axis=0)) / np.diff(motion.time)[:, None]
    assert speed.max() < 3.0  # the safety filter's default bound: it passes the commands unchanged
    np.testing.assert_allclose(motion.position[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(motion.position[-1], 0.0, atol=1e-12)
    assert motion.time[-1] == pytest.approx(20.0)


def test_a_seed_fixes_the_motion_and_seeds_differ() -> None:
    np.testing.assert_array_equal(excitation_motion(3).position, excitation_motion(3).position)
    assert np.abs(excitation_motion(3).position - excitation_motion(4).position).max() > 0.2


def test_each_joint_covers_a_good_part_of_its_range() -> None:
    motion = excitation_motion(0, duration=30.0, amplitude=0.6)
    for i, spec in enumerate(JOINTS):
        assert np.ptp(motion.position[:, i]) > 0.3 * spec.span, spec.name
