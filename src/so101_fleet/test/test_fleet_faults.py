"""The fleet pipeline pairs an episode's servo-fault spans as ``so101 pair`` does: marked, not gaps."""

from __future__ import annotations

import numpy as np
import pytest

from so101_common.paired_dataset import FaultSpan
from so101_common.trajectory import JointTrajectory
from so101_fleet.sim2real_adapter import gap_summary, pair_with_mujoco

T0 = 1_700_000_000.0


def test_fault_spans_reach_the_fleet_episode_and_stay_out_of_its_gap_summary(tmp_path) -> None:
    time = T0 + np.arange(150) * 0.02
    command = 0.2 * np.sin(2 * np.pi * 0.5 * (time - T0))[:, None] * np.ones(6)
    state = JointTrajectory(time, command)
    span = FaultSpan(joint="shoulder_lift", fault="overheat", start=T0 + 2.0, end=T0 + 2.5, message="servo reports OVERHEAT")
    dataset = pair_with_mujoco("ep", state, JointTrajectory(time, command), 50.0, {"format": "bag"}, [span])
    (marked,) = dataset.episodes[0].faults()
    start = dataset.episodes[0].metadata["grid_start_real_clock_s"]
    assert (marked.joint, marked.fault) == ("shoulder_lift", "overheat")
    assert (marked.start, marked.end) == pytest.approx((T0 + 2.0 - start, T0 + 2.5 - start))
    dataset.save(tmp_path / "ep")
    assert gap_summary(dataset, tmp_path / "ep")["faults"] == {"ep": [marked.model_dump()]}
