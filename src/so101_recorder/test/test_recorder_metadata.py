"""Episode metadata (episode.yaml) and rosbag2's metadata.yaml: bad files are one line naming file and key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from so101_recorder.bag_reader import bag_files
from so101_recorder.errors import RecorderError
from so101_recorder.metadata import EPISODE_FILE, EpisodeMetadata, FileRef, TopicStats, load_episode


def _saved(tmp_path: Path) -> dict:
    episode = EpisodeMetadata(name="ep", robot_id="arm", task="t", calibration=FileRef("/cal.json", "ab"),
                              topics={"/joint_states": TopicStats(type="sensor_msgs/msg/JointState", count=3)})
    episode.save(tmp_path)
    return yaml.safe_load((tmp_path / EPISODE_FILE).read_text())


def test_round_trip_through_episode_yaml(tmp_path: Path) -> None:
    record = _saved(tmp_path)
    episode = load_episode(tmp_path)
    assert episode is not None and episode.to_dict() == record
    assert episode.calibration == FileRef("/cal.json", "ab") and episode.topics["/joint_states"].count == 3
    assert load_episode(tmp_path / "elsewhere") is None  # no episode.yaml: not an error


@pytest.mark.parametrize(("edit", "key"), [
    (lambda r: r | {"status": "paused"}, "status"),
    (lambda r: r | {"schema_version": 2}, "schema_version"),
    (lambda r: r | {"robot": "arm"}, "robot"),
    (lambda r: r | {"start_time_ns": "soon"}, "start_time_ns"),
    (lambda r: r | {"calibration": {"path": "/cal.json", "sha": "ab"}}, "calibration.sha"),
    (lambda r: r | {"topics": {"/joint_states": {"type": "x", "count": "many"}}}, "topics./joint_states.count"),
    (lambda r: {k: v for k, v in r.items() if k != "robot_id"}, "robot_id"),
])
def test_a_bad_episode_yaml_is_one_line_naming_file_and_key(tmp_path: Path, edit, key: str) -> None:
    (tmp_path / EPISODE_FILE).write_text(yaml.safe_dump(edit(_saved(tmp_path))))
    with pytest.raises(RecorderError) as caught:
        load_episode(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / EPISODE_FILE}: {key}: ") and "\n" not in str(caught.value)


def test_an_episode_yaml_with_a_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / EPISODE_FILE).write_text("name: ep\nrobot_id: [arm\n")
    with pytest.raises(RecorderError, match=rf"^{tmp_path / EPISODE_FILE}:\d+:\d+: YAML syntax error"):
        load_episode(tmp_path)


def test_a_bad_rosbag2_metadata_file_is_reported_and_the_mcap_files_read(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "ep.mcap").write_bytes(b"")
    (tmp_path / "metadata.yaml").write_text("rosbag2_bagfile_information:\n  relative_file_paths: 3\n")
    with caplog.at_level(logging.WARNING):
        assert bag_files(tmp_path) == (tmp_path, [tmp_path / "ep.mcap"], "mcap")
    assert f"{tmp_path / 'metadata.yaml'}: rosbag2_bagfile_information.relative_file_paths: " in caplog.text
