"""The recorder core without ROS: episodes, limits, metadata and error handling."""

from __future__ import annotations

import hashlib

import pytest
from recorder_helpers import JOINT_STATE, stream

from so101_recorder.bag_reader import Bag
from so101_recorder.errors import RecorderError
from so101_recorder.metadata import load_episode
from so101_recorder.msgtypes import TypeLibrary
from so101_recorder.recorder import Recorder, RecorderConfig


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_episodes_start_stop_toggle_and_ignore_messages_while_idle(tmp_path):
    recorder = Recorder(RecorderConfig(root=tmp_path, robot_id="arm7", task="wave", gap_profile="backlash_heavy"))
    raws = stream(30)
    assert not recorder.write("/joint_states", JOINT_STATE, raws[0], 1)
    assert recorder.stop() is None
    first = recorder.start(notes="slow")
    with pytest.raises(RecorderError, match="already recording"):
        recorder.start()
    for k, raw in enumerate(raws[:10]):
        assert recorder.write("/joint_states", JOINT_STATE, raw, k)
    status = recorder.status()
    assert status.recording and status.messages == 10 and status.ignored == 1 and status.bag == first
    episode = recorder.stop()
    assert episode.message_count == 10 and episode.notes == "slow" and episode.gap_profile.path == "backlash_heavy"
    assert recorder.toggle() is True
    recorder.write("/joint_states", JOINT_STATE, raws[10], 10)
    assert recorder.toggle() is False
    assert recorder.status().episodes == 2
    bags = sorted(tmp_path.iterdir())
    assert [b.name[-8:] for b in bags] == ["wave_001", "wave_002"]
    assert [len(Bag(b).raw("/joint_states")) for b in bags] == [10, 1]
    assert load_episode(bags[0]).robot_id == "arm7"


def test_max_episode_duration_stops_the_episode(tmp_path):
    clock = Clock()
    recorder = Recorder(RecorderConfig(root=tmp_path, max_episode_s=2.0), clock=clock)
    recorder.start()
    recorder.write("/joint_states", JOINT_STATE, stream(1)[0], 1)
    clock.now = 1.9
    assert recorder.tick() is None and recorder.recording
    clock.now = 2.0
    finished = recorder.tick()
    assert finished is not None and finished.status == "complete" and not recorder.recording


def test_calibration_file_is_hashed_and_a_missing_one_refuses_to_start(tmp_path):
    calibration = tmp_path / "follower.json"
    calibration.write_text('{"gripper": {"id": 6}}')
    recorder = Recorder(RecorderConfig(root=tmp_path / "bags", calibration_file=str(calibration)))
    bag = recorder.start()
    recorder.stop()
    ref = load_episode(bag).calibration
    assert ref.path == str(calibration.resolve())
    assert ref.sha256 == hashlib.sha256(calibration.read_bytes()).hexdigest()
    missing = Recorder(RecorderConfig(root=tmp_path / "bags", calibration_file=str(tmp_path / "nope.json")))
    with pytest.raises(RecorderError, match="nope.json"):
        missing.start()
    assert missing.status().errors == 1 and not missing.recording


def test_unknown_type_is_refused_once_and_the_episode_goes_on(tmp_path):
    recorder = Recorder(RecorderConfig(root=tmp_path), types=TypeLibrary(search_dirs=[]))
    with pytest.raises(RecorderError, match="unknown message type"):
        recorder.check_type("acme_msgs/msg/Gizmo")
    recorder.start()
    with pytest.raises(RecorderError, match="acme_msgs/msg/Gizmo"):
        recorder.write("/gizmo", "acme_msgs/msg/Gizmo", b"\x00\x01\x00\x00", 1)
    assert not recorder.write("/gizmo", "acme_msgs/msg/Gizmo", b"\x00\x01\x00\x00", 2)  # ignored from now on
    assert recorder.write("/joint_states", JOINT_STATE, stream(1)[0], 3)
    assert recorder.stop().message_count == 1


def test_unknown_type_is_found_in_a_msg_file(tmp_path):
    share = tmp_path / "share"
    (share / "acme_msgs" / "msg").mkdir(parents=True)
    (share / "acme_msgs" / "msg" / "Gizmo.msg").write_text("std_msgs/Header header\nacme_msgs/Part[] parts\n")
    (share / "acme_msgs" / "msg" / "Part.msg").write_text("string label\nfloat64 value\n")
    types = TypeLibrary(search_dirs=[share])
    msgdef, rihs01 = types.definition("acme_msgs/msg/Gizmo")
    assert "MSG: acme_msgs/Part" in msgdef and rihs01.startswith("RIHS01_")


def test_write_error_ends_the_episode_and_is_reported(tmp_path):
    clock = Clock()
    recorder = Recorder(RecorderConfig(root=tmp_path, flush_period_s=0.5), clock=clock)
    bag = recorder.start()
    recorder._writer._output.file = open("/dev/full", "wb")  # ENOSPC from the kernel
    recorder.write("/joint_states", JOINT_STATE, stream(1)[0], 0)  # buffered: fine so far
    clock.now = 1.0
    with pytest.raises(RecorderError, match="No space left on device"):
        recorder.tick()  # the time-bounded flush hits the full disk
    status = recorder.status()
    assert not status.recording and status.errors == 1 and "ENOSPC" in (status.last_error or "")
    assert load_episode(bag).status == "failed"
    assert recorder.start() != bag  # a new episode can start once space is back


def test_config_is_validated():
    with pytest.raises(RecorderError):
        RecorderConfig(flush_period_s=0)
    with pytest.raises(RecorderError):
        RecorderConfig(robot_id="")
    assert RecorderConfig(max_episode_s=0).max_episode_s is None


def test_live_config_updates_are_validated_all_or_nothing(tmp_path):
    config = RecorderConfig(root=tmp_path, task="a")
    config.update({"task": "b", "max_episode_s": 0.0, "gap_profile": ""})
    assert (config.task, config.max_episode_s, config.gap_profile) == ("b", None, None)
    with pytest.raises(RecorderError, match="start-up only"):
        config.update({"task": "c", "root": "/elsewhere"})
    with pytest.raises(RecorderError, match="robot_id"):
        config.update({"task": "c", "robot_id": ""})
    assert config.task == "b"


def test_servo_faults_go_into_the_episode_metadata_at_once_and_per_episode(tmp_path):
    from so101_common.servo_faults import ServoFault, ServoFaultKind

    recorder = Recorder(RecorderConfig(root=tmp_path, task="wave"))
    overload = ServoFault("shoulder_lift", (ServoFaultKind.OVERLOAD,), "servo reports OVERLOAD")
    recorder.observe_faults(5.0, [overload])  # idle: not part of any episode
    bag = recorder.start()
    recorder.observe_faults(10.0, [ServoFault("shoulder_lift", (), "ok")])
    recorder.observe_faults(12.5, [overload])
    on_disk = load_episode(bag)  # written when the span opened, before the episode ends (a crash keeps it)
    assert [(s.joint, s.fault, s.start, s.end) for s in on_disk.faults] == [("shoulder_lift", "overload", 12.5, None)]
    recorder.observe_faults(13.0, [ServoFault("shoulder_lift", (), "ok")])
    episode = recorder.stop()
    assert [(s.start, s.end, s.message) for s in episode.faults] == [(12.5, 13.0, "servo reports OVERLOAD")]
    assert load_episode(bag).faults == episode.faults and Bag(bag).episode.faults == episode.faults
    recorder.start()
    assert recorder.current_faults() == []  # a new episode starts without the last one's spans
