"""The shipped compensator in closed loop on the virtual SO-101 (simulated time), on arms it was not
trained on: it settles on a held target (no ringing from its integral corrections), keeps every joint
inside its range, and ends nearer the target than the arm does without it."""

from __future__ import annotations

import numpy as np
import pytest

from so101_apps.compensation.harness import RATE_HZ, closed_loop
from so101_bringup.share import models_dir
from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.trajectory import JointTrajectory
from so101_gaponet.model_file import load_model


def _move_and_hold() -> JointTrajectory:
    """Every joint: 1 s out by 15 % of its span and back half way (a reversal), then held for 4 s."""
    t = np.arange(0.0, 6.0, 1.0 / RATE_HZ)
    centre = np.array([(j.lower + j.upper) / 2 for j in JOINTS])
    reach = np.array([0.15 * (j.upper - j.lower) for j in JOINTS])
    shape = np.interp(t, [0.0, 1.0, 2.0, 6.0], [0.0, 1.0, 0.5, 0.5])
    return JointTrajectory(t, centre + reach * shape[:, None], names=JOINT_NAMES)


@pytest.mark.parametrize("profile", ["ideal", "worn"])
def test_shipped_compensator_settles_in_range_on_arms_it_was_not_trained_on(profile: str) -> None:
    motion = _move_and_hold()
    reported, sent = closed_loop(profile, motion, load_model(models_dir() / "gaponet_so101_default.onnx"))
    plain, _ = closed_loop(profile, motion)
    last_second = slice(-int(RATE_HZ), None)
    spread = np.ptp(sent[last_second], axis=0)
    # The integral still creeps by a few mrad where friction holds a joint short (measured on `worn`: at most
    # 7 mrad, the same with one correction for both directions); a ringing loop swings by 0.1 rad and more.
    assert spread.max() <= 0.01, spread
    lower, upper = np.array([j.lower for j in JOINTS]), np.array([j.upper for j in JOINTS])
    assert np.all((reported >= lower) & (reported <= upper))
    target = motion.position[-1]
    held_error = np.abs(reported[last_second] - target).mean(axis=0)
    assert np.all(held_error <= np.abs(plain[last_second] - target).mean(axis=0) + 0.002), held_error
