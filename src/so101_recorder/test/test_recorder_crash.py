"""A recorder killed with SIGKILL mid-episode leaves a bag readable up to its last flush (≤ ~0.5 s back)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcap.exceptions import EndOfFile
from mcap.records import Message
from mcap.stream_reader import StreamReader
from recorder_helpers import TEST_DIR
from rosbags.rosbag2 import Reader

from so101_recorder.bag_reader import Bag, load_joint_states
from so101_recorder.metadata import load_episode
from so101_recorder.recovery import recover_bag


def test_sigkill_mid_episode_leaves_a_readable_and_recoverable_bag(tmp_path):
    child = subprocess.Popen([sys.executable, str(TEST_DIR / "recorder_crash_child.py"), str(tmp_path)],
                             stdout=subprocess.PIPE, text=True, cwd=TEST_DIR)
    try:
        bag = Path(child.stdout.readline().split()[1])
        first = None
        for line in child.stdout:  # wait (on the child's own progress) for ~1.5 s of recording
            _k, stamp = map(int, line.split())
            first = first or stamp
            if stamp - first > 1.5e9:
                break
        killed_at = time.time_ns()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    mcap = bag / f"{bag.name}.mcap"
    assert not (bag / "metadata.yaml").exists() and load_episode(bag).status == "recording"

    # the mcap library's sequential reader gets every flushed message, then hits the missing footer
    messages: list[Any] = []
    with pytest.raises(EndOfFile), mcap.open("rb") as handle:
        messages.extend(r for r in StreamReader(handle).records if isinstance(r, Message))
    assert len(messages) > 150
    assert killed_at - messages[-1].log_time < 1.0e9  # lost at most the last ~0.5 s (flush period) + scheduling

    # our reader reads the same, reports the truncation, and the samples form an unbroken prefix
    read = load_joint_states(bag)
    assert read.truncated and read.messages == len(messages) and read.corrupt == 0
    np.testing.assert_array_equal(read.trajectory.position[:, 0], np.arange(len(messages)))

    with pytest.raises(Exception):  # noqa: B017 - rosbags refuses it before recovery
        Reader(bag).open()
    report = recover_bag(bag)
    assert report.recovered and report.messages == len(messages)
    with Reader(bag) as reader:
        recovered = [(t, bytes(d)) for _c, t, d in reader.messages()]
    assert recovered == [(m.log_time, m.data) for m in messages]  # same bytes, same timestamps
    episode = load_episode(bag)
    assert episode.status == "recovered" and episode.topics["/joint_states"].count == len(messages)
    assert episode.robot_id == "crash_arm" and not Bag(bag).truncated
    assert (bag / f"{mcap.name}.truncated").exists()
