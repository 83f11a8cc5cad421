"""Recorder benchmarks (``so101 bench``): bag reading/decoding and episode writing.

- ``recorder.bag_to_trajectory_rate``: messages/s from an episode bag (two 100 Hz JointState topics
  interleaved, as recorded) to a :class:`JointTrajectory` of one topic with :func:`load_joint_states`;
  baseline: rosbags' ``Reader`` + per-message ``deserialize_cdr`` building the same arrays, same bag,
  same run. Target: 10x the baseline.
- ``recorder.joint_state_decode_rate``: the decoder alone on in-memory messages
  (:func:`decode_joint_states`) against ``deserialize_cdr`` per message. Target: 10x.
- ``recorder.write_rate``: raw messages/s through :class:`EpisodeWriter` (time-bounded flushes,
  metadata); baseline: rosbags' stock ``Writer`` with MCAP storage (no flushing, no bookkeeping).
  Target: 20 000 msg/s (a full SO-101 graph records ~1 500 msg/s).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from so101_common import topics
from so101_common.bench import BenchResult
from so101_common.joints import JOINT_NAMES

__all__ = ["benchmarks", "make_messages"]

JOINT_STATE = "sensor_msgs/msg/JointState"


def make_messages(count: int, seed: int = 0) -> list[bytes]:
    """``count`` serialized 6-joint JointStates at 100 Hz (positions, velocities, efforts all set)."""
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    types = store.types
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        ns = 1_700_000_000 * 10**9 + k * 10_000_000
        header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9),
                                              frame_id="")
        msg = types[JOINT_STATE](header=header, name=list(JOINT_NAMES), position=rng.normal(size=6),
                                 velocity=rng.normal(size=6), effort=rng.normal(size=6))
        out.append(bytes(store.serialize_cdr(msg, JOINT_STATE)))
    return out


def _best_rate(count: int, fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return count / best


def _write_episode(path: Path, messages: list[bytes]) -> None:
    from so101_recorder.bag_writer import EpisodeWriter
    from so101_recorder.metadata import EpisodeMetadata

    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="bench", task="bench")) as writer:
        for k, data in enumerate(messages):
            writer.write(topics.absolute(topics.JOINT_STATES) if k % 2 == 0 else topics.absolute(topics.JOINT_COMMAND), JOINT_STATE, data, k)


def _write_stock(path: Path, messages: list[bytes]) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    connections = [writer.add_connection(t, JOINT_STATE, typestore=store) for t in (topics.absolute(topics.JOINT_STATES), topics.absolute(topics.JOINT_COMMAND))]
    for k, data in enumerate(messages):
        writer.write(connections[k % 2], k, data)
    writer.close()


def bench_read(workdir: Path, messages: list[bytes]) -> BenchResult:
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from so101_recorder.bag_reader import load_joint_states

    bag = workdir / "read_bag"
    _write_episode(bag, messages)
    count = len(messages) // 2
    store = get_typestore(Stores.ROS2_JAZZY)

    def ours() -> None:
        read = load_joint_states(bag, topics.absolute(topics.JOINT_STATES))
        assert len(read.trajectory) == count

    def baseline() -> None:
        time_, position, velocity, effort = [], [], [], []
        with Reader(bag) as reader:
            connections = [c for c in reader.connections if c.topic == topics.absolute(topics.JOINT_STATES)]
            for connection, _t, data in reader.messages(connections=connections):
                msg: Any = store.deserialize_cdr(data, connection.msgtype)
                time_.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
                position.append(msg.position)
                velocity.append(msg.velocity)
                effort.append(msg.effort)
        assert np.array(position).shape == (count, 6)

    return BenchResult("recorder.bag_to_trajectory_rate", _best_rate(count, ours, 5), "msg/s",
                       base := _best_rate(count, baseline, 2), "rosbags Reader + deserialize_cdr per message (same bag)",
                       target=10 * base)


def bench_decode(messages: list[bytes]) -> BenchResult:
    from rosbags.typesys import Stores, get_typestore

    from so101_recorder.cdr import decode_joint_states, pack_messages

    store = get_typestore(Stores.ROS2_JAZZY)
    packed = pack_messages(messages)

    def baseline() -> None:
        for data in messages:
            store.deserialize_cdr(data, JOINT_STATE)

    rate = _best_rate(len(messages), lambda: decode_joint_states(*packed), 5)
    base = _best_rate(len(messages), baseline, 2)
    return BenchResult("recorder.joint_state_decode_rate", rate, "msg/s", base, "rosbags deserialize_cdr per message",
                       target=10 * base)


def bench_write(workdir: Path, messages: list[bytes]) -> BenchResult:
    runs = iter(range(1000))
    ours = _best_rate(len(messages), lambda: _write_episode(workdir / f"w{next(runs)}", messages), 3)
    stock = _best_rate(len(messages), lambda: _write_stock(workdir / f"w{next(runs)}", messages), 3)
    return BenchResult("recorder.write_rate", ours, "msg/s", stock, "rosbags Writer (MCAP, no time-bounded flush)",
                       target=20_000)


def benchmarks(count: int = 40_000) -> Iterator[BenchResult]:
    messages = make_messages(count)
    with tempfile.TemporaryDirectory(prefix="so101_recorder_bench_") as tmp:
        workdir = Path(tmp)
        yield bench_read(workdir, messages)
        yield bench_decode(messages[: count // 2])
        yield bench_write(workdir, messages)


if __name__ == "__main__":
    for result in benchmarks():
        print(result.to_json())
