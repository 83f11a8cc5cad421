"""The arm population: a seed is one arm, drawn over the schema's dimensions, and only arms that work are drawn."""

from __future__ import annotations

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_virtual.population import TEST_SEEDS, TRAIN_SEEDS, VALIDATION_SEEDS, ArmPopulation, working
from so101_virtual.profiles import GapProfile, load_profile, profile_from_dict, profile_to_dict


@pytest.fixture(scope="module")
def arms() -> list[GapProfile]:
    return [ArmPopulation().draw(seed) for seed in TRAIN_SEEDS[:6]]


def test_a_seed_is_one_arm_and_the_seed_ranges_do_not_overlap(arms: list[GapProfile]) -> None:
    assert profile_to_dict(ArmPopulation().draw(3)) == profile_to_dict(arms[3])
    assert profile_to_dict(arms[3]) != profile_to_dict(arms[4])
    assert not set(TRAIN_SEEDS) & set(VALIDATION_SEEDS) and not set(VALIDATION_SEEDS) & set(TEST_SEEDS)
    assert not set(TRAIN_SEEDS) & set(TEST_SEEDS)


def test_draws_span_the_schema_s_dimensions_within_the_population_s_ranges(arms: list[GapProfile]) -> None:
    base = load_profile(ArmPopulation().base)
    latency = np.array([a.bus.latency for a in arms])
    p_gain = np.array([a.firmware.p_gain for a in arms]) / base.firmware.p_gain
    payload = np.array([a.physics.payload_mass for a in arms])
    assert latency.min() >= 0.0 and latency.max() <= 0.015 and np.ptp(latency) > 0.005
    assert p_gain.min() >= 0.45 - 1e-9 and p_gain.max() <= 2.5 + 1e-9 and p_gain.max() / p_gain.min() > 1.5
    assert np.any(payload == 0.0) and np.any(payload > 0.0) and payload.max() <= 0.2
    backlash = np.array([[a.joint(n).backlash for n in JOINT_NAMES] for a in arms])
    assert np.ptp(backlash, axis=0).min() > 0  # every joint varies from arm to arm
    for arm in arms:  # a gearbox whose friction nears its motor's stall torque would not move
        assert all(arm.joint(n).coulomb_friction <= 0.4 * arm.joint(n).stall_torque + 1e-12 for n in JOINT_NAMES)


def test_only_working_arms_are_drawn(arms: list[GapProfile]) -> None:
    # known answers: the fitted arm works; the same arm with a third of its P gain and a 0.2 kg payload cannot
    # hold its shoulder up (its overload protection trips or it sags by more than MAX_SAG)
    assert working(load_profile("default")) == ""
    weak = profile_from_dict({"firmware": {"p_gain": 0.12}, "physics": {"payload_mass": 0.2}}, base=load_profile("default"))
    assert working(weak) != ""
    assert all(working(arm) == "" for arm in arms[:2])
