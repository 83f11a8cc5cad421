"""``so101 fleet simulate``: normal episode bags with fleet metadata, simulated time, deterministic, wear drift."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from mcap.reader import make_reader
from rosbags.highlevel import AnyReader
from small_fleet import SMALL_FLEET

from so101_fleet.simulate import FLEET_EPOCH, FleetConfig, load_fleet, simulate_fleet
from so101_fleet.wear import arm_profile, draw_fleet


def _bags(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/metadata.yaml"))


def test_fleet_bags_read_back_with_rosbags_and_carry_fleet_metadata(small_fleet: Path) -> None:
    bags = _bags(small_fleet)
    assert len(bags) == SMALL_FLEET.arms * SMALL_FLEET.episodes
    samples = round(SMALL_FLEET.duration_s * SMALL_FLEET.rate_hz)
    for bag in bags:
        with AnyReader([bag]) as reader:  # rosbags, independent of the recorder's reader
            counts = {c.topic: c.msgcount for c in reader.connections}
            assert counts == {"/joint_states": samples, "/joint_command": samples,
                              "/diagnostics": round(SMALL_FLEET.duration_s)}
            stamps = []
            for connection, _timestamp, raw in reader.messages([c for c in reader.connections
                                                                 if c.topic == "/joint_states"]):
                msg: Any = reader.deserialize(raw, connection.msgtype)
                stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
                assert list(msg.name)[0] == "shoulder_pan" and len(msg.position) == 6
        # simulated time: a 50 Hz grid from a start on the fleet's calendar, not the wall clock
        assert np.allclose(np.diff(stamps), 1 / SMALL_FLEET.rate_hz, atol=1e-6)
        assert stamps[0] >= FLEET_EPOCH.timestamp() and stamps[0] < FLEET_EPOCH.timestamp() + 30 * 86400
        meta = yaml.safe_load((bag / "episode.yaml").read_text())
        assert meta["robot_id"] == bag.parent.name and meta["operator"] == "fleet-sim"
        assert meta["status"] == "complete" and meta["task"] in bag.name
        assert (meta["stop_time_ns"] - meta["start_time_ns"]) / 1e9 == SMALL_FLEET.duration_s
        profile = Path(meta["gap_profile"]["path"])
        assert hashlib.sha256(profile.read_bytes()).hexdigest() == meta["gap_profile"]["sha256"]
        custom = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]["custom_data"]
        assert yaml.safe_load(custom["so101.episode"])["robot_id"] == meta["robot_id"]


def test_same_seed_same_fleet(tmp_path: Path, small_fleet: Path) -> None:
    config = FleetConfig(arms=1, episodes=1, duration_s=1.0, seed=SMALL_FLEET.seed)
    first, second = simulate_fleet(tmp_path / "a", config), simulate_fleet(tmp_path / "b", config)

    def payloads(bag: Path) -> list[bytes]:
        with (bag / f"{bag.name}.mcap").open("rb") as handle:
            return [m.data for _s, _c, m in make_reader(handle).iter_messages()]

    assert [b.name for b in first] == [b.name for b in second]
    assert payloads(first[0]) == payloads(second[0])
    # and the arm is the one the big fleet drew with the same seed (arm 0)
    alone, in_fleet = load_fleet(tmp_path / "a")["arms"][0], load_fleet(small_fleet)["arms"][0]
    assert (alone["seed"], alone["factors"]) == (in_fleet["seed"], in_fleet["factors"])


def test_wear_grows_gearbox_figures_fastest_on_the_fast_arms() -> None:
    arms = draw_fleet(8, seed=3)
    assert 1 <= sum(a.fast_wear for a in arms) < 8
    growth = {}
    for arm in arms:
        day0, day10 = arm_profile(arm, 0), arm_profile(arm, 10)
        assert day10.joint("elbow_flex").backlash >= day0.joint("elbow_flex").backlash
        growth[arm.robot_id] = day10.joint("elbow_flex").coulomb_friction / day0.joint("elbow_flex").coulomb_friction
    fastest = sorted(growth, key=growth.__getitem__, reverse=True)[:sum(a.fast_wear for a in arms)]
    assert {a.robot_id for a in arms if a.fast_wear} == set(fastest)


def test_an_arms_episodes_of_one_day_do_not_overlap() -> None:
    from so101_fleet.simulate import episode_plan

    config = FleetConfig(arms=1, episodes=12, days=1, duration_s=45.0)
    [arm] = draw_fleet(1, seed=0)
    starts = [start for _day, _task, start in episode_plan(config, 0, arm)]
    assert all(b - a >= 45e9 for a, b in zip(starts, starts[1:], strict=False))


def test_existing_fleet_is_not_overwritten(small_fleet: Path) -> None:
    import pytest

    with pytest.raises(FileExistsError, match="fleet.yaml"):
        simulate_fleet(small_fleet, SMALL_FLEET)
