"""Replay node against the MuJoCo bridge node over real DDS (two child processes + the test).

Also: the bridge alone answers a command by name with joint states and /clock on sim time; and
``so101 replay --sim isaac`` drives the same bridge from the test process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from so101_common.joints import JOINT_NAMES, gripper_fraction_to_rad
from so101_testing import NodeProcess, run_cli, wait_for

REPLAY_CLI = "so101_sim2real.cli.replay"  # what `so101 replay` runs
FIXTURES = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
CONFIG = Path(__file__).resolve().parents[3] / "config"
MOTION = FIXTURES / "motion_files" / "so101" / "custom" / "single_joint_elbow.txt"


def motion_targets() -> np.ndarray:
    rows = np.loadtxt(MOTION, delimiter=",", skiprows=1)
    rows[:, -1] = [gripper_fraction_to_rad(v) for v in rows[:, -1]]
    return rows


def read(bag: Path) -> dict[str, list]:
    with AnyReader([bag]) as reader:
        return {c.topic: [reader.deserialize(raw, c.msgtype) for _, _, raw in reader.messages([c])]
                for c in reader.connections}


@pytest.fixture
def bridge():
    start = ",".join(f"{v:.6f}" for v in [0.3, -0.2, 0.1, 0.0, 0.0, 0.2])
    with NodeProcess("so101_sim2real.mujoco_bridge_node",
                     ["--ros-args", "--params-file", str(CONFIG / "mujoco_bridge.yaml"), "-p", "time_factor:=1.0", "-p", f"start_position:=[{start}]"]) as process:
        yield process


def test_replay_node_records_sim_states_that_follow_the_commands(bridge: NodeProcess, tmp_path: Path) -> None:
    out = tmp_path / "sim_bag"
    replay = NodeProcess("so101_sim2real.replay_node", ["--ros-args", "--params-file", str(CONFIG / "replay.yaml"), "-p", f"motion:={MOTION}", "-p", f"out:={out}",
                                                         "-p", "settle_s:=0.5", "-p", "use_sim_time:=true"])
    with replay:
        assert wait_for(lambda: not replay.alive(), timeout=90), replay.output() + bridge.output()
    assert replay.process is not None and replay.process.returncode == 0, replay.output()
    assert bridge.alive(), bridge.output()
    topics = read(out)
    assert set(topics) == {"/isaac_joint_command", "/isaac_joint_states", "/clock"}
    targets = motion_targets()
    commands = topics["/isaac_joint_command"]
    sent = np.array([m.position for m in commands])
    assert len(sent) == len(targets) + 1  # the initial-state command, then every frame once
    np.testing.assert_allclose(sent[0], targets[0], atol=1e-12)  # a motion starts at its first frame
    np.testing.assert_allclose(sent[1:], targets, atol=1e-12)
    sent_at = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in commands])
    # original 50 Hz timing on sim time: each frame goes out close to when it is due (the sim clock advances
    # in catch-up bursts when the shared test machine is busy, hence the margin of a few frames)
    due = sent_at[1] + 0.02 * np.arange(len(targets))
    assert np.abs(sent_at[1:] - due).max() < 0.12
    assert np.median(np.diff(sent_at[1:])) == pytest.approx(0.02, abs=0.006)
    assert sent_at[1] - sent_at[0] == pytest.approx(0.5, abs=0.12)  # settle_s after the initial-state command
    states = topics["/isaac_joint_states"]
    assert list(states[0].name) == list(JOINT_NAMES)
    state_at = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in states])
    position = np.array([m.position for m in states])
    # after settling the sim sits at the real initial state; at the end it has followed to the last frame
    settled = position[np.searchsorted(state_at, sent_at[1]) - 1]
    np.testing.assert_allclose(settled, targets[0], atol=0.03)
    np.testing.assert_allclose(position[-1], targets[-1], atol=0.05)
    during = (state_at > sent_at[1]) & (state_at < sent_at[-1])
    held = targets[np.clip(np.searchsorted(sent_at[1:], state_at[during], side="right") - 1, 0, len(targets) - 1)]
    assert np.abs(position[during] - held).max() < 0.15
    clocks = np.array([m.clock.sec + m.clock.nanosec * 1e-9 for m in topics["/clock"]])
    assert (np.diff(clocks) > 0).all()


def test_so101_replay_sim_isaac_against_the_bridge(bridge: NodeProcess, tmp_path: Path) -> None:
    out = tmp_path / "isaac_bag"
    assert run_cli(REPLAY_CLI, ["--isaac", "--motion", str(MOTION), "--out", str(out), "--settle", "0.3"]) == 0, bridge.output()
    topics = read(out)
    states = np.array([m.position for m in topics["/isaac_joint_states"]])
    assert len(topics["/isaac_joint_command"]) == len(motion_targets()) + 1
    np.testing.assert_allclose(states[-1], motion_targets()[-1], atol=0.05)


def test_a_replay_waiting_for_its_simulator_says_what_it_has_not_seen() -> None:
    """``so101 replay --isaac`` with no simulator running waited without a word after its first line."""
    from so101_sim2real.replay_node import simulator_waits

    assert simulator_waits(False, 0.0, 0, "/isaac_joint_states", "/isaac_joint_command") == [
        "no joint states on /isaac_joint_states yet", "no /clock yet (use_sim_time)",
        "nothing subscribes to /isaac_joint_command yet"]
    assert simulator_waits(True, 12.5, 1, "/isaac_joint_states", "/isaac_joint_command") == []
