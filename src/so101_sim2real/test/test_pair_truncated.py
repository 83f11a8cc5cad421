"""Pairing bags cut by a killed recorder: the cut is said on the console, in dataset.json and in the report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from so101_common.joints import JOINT_NAMES
from so101_common.paired_dataset import PairedDataset
from so101_recorder.bag_reader import load_joint_states
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.metadata import EpisodeMetadata
from so101_sim2real.cli import pair as pair_cli

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)
JOINT_STATE = "sensor_msgs/msg/JointState"
T0 = 1_700_000_000.0


def _joint_state(t: float, position: np.ndarray) -> bytes:
    types = TYPESTORE.types
    sec = int(t)
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=round((t - sec) * 1e9)),
                                          frame_id="")
    msg = types[JOINT_STATE](header=header, name=list(JOINT_NAMES), position=position.astype(np.float64),
                             velocity=np.zeros(6), effort=np.zeros(6))
    return bytes(TYPESTORE.serialize_cdr(msg, JOINT_STATE))


def _bag(root: Path, task: str, topics: tuple[str, ...], flush_period_s: float, cut: float) -> Path:
    """2 s of a sine motion at 100 Hz on ``topics``, the MCAP file then cut to ``cut`` of its length."""
    path = next_episode_path(root, task)
    clock = [0.0]
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task=task), flush_period_s=flush_period_s,
                       clock=lambda: clock[0]) as writer:
        for k in range(200):
            clock[0] = k * 0.01
            position = 0.3 * np.sin(2 * np.pi * 0.5 * k * 0.01 + np.arange(6))
            for topic in topics:
                writer.write(topic, JOINT_STATE, _joint_state(T0 + k * 0.01, position), round((T0 + k * 0.01) * 1e9))
    mcap = path / f"{path.name}.mcap"
    full = mcap.read_bytes()
    mcap.write_bytes(full[: int(len(full) * cut)])
    (path / "metadata.yaml").unlink()  # as a killed recorder leaves it
    return path


def _args(tmp_path: Path, real: Path, sim: Path) -> argparse.Namespace:
    return argparse.Namespace(real=real, sim=str(sim), out=tmp_path / "paired", rate=50.0, real_topic="/joint_states",
                              command_topic="/joint_command", sim_topic="/isaac_joint_states",
                              sim_command_topic="/isaac_joint_command", max_offset=None, no_drift=True, force=False,
                              report=tmp_path / "report")


@pytest.mark.parametrize(("flush_period_s", "cut"), [(0.25, 0.6), (10.0, 0.9)], ids=["multi_chunk", "single_chunk"])
def test_a_cut_bag_pairs_up_to_the_cut_and_says_so_everywhere(tmp_path, capsys: pytest.CaptureFixture[str],
                                                               flush_period_s, cut):
    real = _bag(tmp_path / "real", "real", ("/joint_states", "/joint_command"), flush_period_s=flush_period_s, cut=cut)
    sim = _bag(tmp_path / "sim", "sim", ("/isaac_joint_states", "/isaac_joint_command"), flush_period_s=0.25, cut=1.0)
    assert pair_cli.run(_args(tmp_path, real, sim)) == 0
    err = capsys.readouterr().err
    dataset = PairedDataset.load(tmp_path / "paired")
    readable = load_joint_states(real).trajectory.time  # what the cut bag still holds of the 2 s recorded
    assert readable[-1] - readable[0] < 1.98
    episode_time = dataset.episodes[0].time
    assert episode_time[-1] - episode_time[0] == pytest.approx(readable[-1] - readable[0], abs=0.03)
    expected = f"`so101 record --recover {real}` rebuilds it"
    assert f"was paired from a truncated bag: real: {real} is truncated at byte " in err and expected in err
    episode = json.loads((tmp_path / "paired" / "dataset.json").read_text())["episodes"][0]
    (note,) = episode["metadata"]["truncated"]
    assert note.startswith(f"real: {real} is truncated at byte ") and note.endswith(expected)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["truncated_inputs"] == {episode["name"]: [note]}
    assert "Episodes from truncated bags" in (tmp_path / "report" / "report.html").read_text()


def test_a_bag_cut_before_its_topic_says_truncated_not_missing(tmp_path, capsys: pytest.CaptureFixture[str]):
    real = _bag(tmp_path / "real", "real", ("/joint_states", "/joint_command"), flush_period_s=10.0, cut=1.0)
    sim = _bag(tmp_path / "sim", "sim", ("/isaac_joint_states", "/isaac_joint_command"), flush_period_s=10.0,
               cut=0.004)  # inside its first message
    assert pair_cli.run(_args(tmp_path, real, sim)) == 1
    out = capsys.readouterr().err
    assert "has no topic" not in out
    assert f"no /isaac_joint_states message before the cut: {sim} is truncated at byte " in out
    assert f"`so101 record --recover {sim}` rebuilds it" in out
