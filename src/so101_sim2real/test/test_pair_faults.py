"""Faults are not gaps: a recording's servo-fault spans reach the paired episode (on its time axis), the
report lists them, shades them and leaves their samples out of the metrics."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import FaultSpan, PairedDataset
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.metadata import EpisodeMetadata
from so101_sim2real.cli import pair as pair_cli
from so101_sim2real.replay.core import joint_state_cdr

JOINT_STATE = "sensor_msgs/msg/JointState"
T0 = 1_700_000_000.0
FAULT_AT = 1.2  # s into the recording: the real arm's elbow collapses there


def _bag(root: Path, task: str, topics: tuple[str, str], faults: list[FaultSpan], collapse: bool) -> Path:
    """2 s of a sine motion at 100 Hz; with ``collapse`` the measured elbow falls 1 rad from FAULT_AT on."""
    path = next_episode_path(root, task)
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task=task, faults=faults)) as writer:
        for k in range(200):
            t = k * 0.01
            command = 0.3 * np.sin(2 * np.pi * 0.5 * t + np.arange(6))
            measured = command.copy()
            if collapse and t >= FAULT_AT:
                measured[JOINT_NAMES.index("elbow_flex")] -= 1.0
            stamp = round((T0 + t) * 1e9)
            writer.write(topics[0], JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, measured, np.zeros(6), np.zeros(6)), stamp)
            writer.write(topics[1], JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, command, np.zeros(6), np.zeros(6)), stamp)
    return path


def test_fault_spans_are_marked_in_pairing_and_reports_and_left_out_of_the_metrics(tmp_path: Path,
                                                                                   caplog: pytest.LogCaptureFixture):
    span = FaultSpan(joint="elbow_flex", fault="overload", start=T0 + FAULT_AT, message="servo reports OVERLOAD")
    real = _bag(tmp_path / "real", "real", ("/joint_states", "/joint_command"), [span], collapse=True)
    sim = _bag(tmp_path / "sim", "sim", ("/isaac_joint_states", "/isaac_joint_command"), [], collapse=False)
    args = argparse.Namespace(real=real, sim=str(sim), out=tmp_path / "paired", rate=50.0, real_topic="/joint_states",
                              command_topic="/joint_command", sim_topic="/isaac_joint_states",
                              sim_command_topic="/isaac_joint_command", max_offset=None, no_drift=True, force=False,
                              report=tmp_path / "report")
    assert pair_cli.run(args) == 0
    assert "elbow_flex: overload from 1.20 s until the end" in caplog.text
    episode = PairedDataset.load(tmp_path / "paired").episodes[0]
    (marked,) = episode.faults()
    assert (marked.joint, marked.fault, marked.end) == ("elbow_flex", "overload", None)
    assert marked.start == pytest.approx(FAULT_AT - (episode.metadata["grid_start_real_clock_s"] - T0), abs=1e-6)
    assert episode.fault_mask().sum() == np.count_nonzero(episode.time >= marked.start)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["faults"] == {episode.name: [marked.model_dump()]}
    # the collapse (1 rad) is not a gap: without it real and sim are the same motion
    assert summary["overall"]["position"]["rmse"]["elbow_flex"] < 0.01
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Servo faults" in page and "elbow_flex: overload from" in page


def test_a_servo_that_did_not_answer_at_the_start_keeps_the_other_joints_measured_start(tmp_path: Path,
                                                                                        caplog: pytest.LogCaptureFixture):
    """The replay starts from the measured pose at the first command; one NaN reading (a servo that did not
    answer, anywhere in the recording) made every joint start from the first command instead."""
    from so101_sim2real.replay.core import load_bag_source

    path = next_episode_path(tmp_path, "real")
    offset = np.array([0.05, -0.04, 0.03, 0.02, -0.06, 0.1])  # the arm rests this far from the first command
    wrist_roll = JOINT_NAMES.index("wrist_roll")
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="real")) as writer:
        for k in range(100):
            t = k * 0.01
            command = 0.3 * np.sin(2 * np.pi * 0.5 * t + np.arange(6))
            measured = offset.copy() if k < 20 else command.copy()
            if k < 30:
                measured[wrist_roll] = np.nan  # wrist_roll did not answer for its first 0.3 s ...
            if k == 60:
                measured[:] = np.nan  # ... and no servo answered once mid-way
            stamp = round((T0 + t) * 1e9)
            writer.write("/joint_states", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, measured, np.zeros(6), np.zeros(6)), stamp)
            if k >= 5:
                writer.write("/joint_command", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, command, np.zeros(6), np.zeros(6)), stamp)
    source = load_bag_source(path)
    expected = offset.copy()
    expected[wrist_roll] = source.command.position[30 - 5, wrist_roll]  # its first reading (k = 30: the command then)
    np.testing.assert_allclose(source.initial_position, expected, atol=1e-9)
    assert "no measured state" not in caplog.text
    caplog.clear()
    never = next_episode_path(tmp_path, "real")
    with EpisodeWriter(never, EpisodeMetadata(name="", robot_id="r", task="real")) as writer:
        for k in range(50):
            t, command = k * 0.01, np.full(6, 0.2)
            measured = np.where(np.arange(6) == wrist_roll, np.nan, offset)
            stamp = round((T0 + t) * 1e9)
            writer.write("/joint_states", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, measured, np.zeros(6), np.zeros(6)), stamp)
            writer.write("/joint_command", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, command, np.zeros(6), np.zeros(6)), stamp)
    source = load_bag_source(never)
    np.testing.assert_allclose(source.initial_position, np.where(np.arange(6) == wrist_roll, 0.2, offset), atol=1e-12)
    assert "has no measured state of wrist_roll on /joint_states: starting it from the first command" in caplog.text
