"""Shared helpers for the so101_recorder tests: serialized JointStates and small bags."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.typesys import Stores, get_typestore

from so101_common.joints import JOINT_NAMES
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.metadata import EpisodeMetadata

TYPESTORE = get_typestore(Stores.ROS2_JAZZY)
JOINT_STATE = "sensor_msgs/msg/JointState"
TEST_DIR = Path(__file__).resolve().parent


def joint_state_msg(sec: int, nanosec: int, names: Sequence[str], position: Iterable[float] = (),
                    velocity: Iterable[float] = (), effort: Iterable[float] = (), frame_id: str = ""):
    types = TYPESTORE.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                          frame_id=frame_id)
    return types[JOINT_STATE](header=header, name=list(names), position=np.asarray(list(position), np.float64),
                              velocity=np.asarray(list(velocity), np.float64), effort=np.asarray(list(effort), np.float64))


def joint_state(sec: int, nanosec: int, names: Sequence[str] = JOINT_NAMES, position: Iterable[float] = (),
                velocity: Iterable[float] = (), effort: Iterable[float] = (), frame_id: str = "",
                little_endian: bool = True) -> bytes:
    msg = joint_state_msg(sec, nanosec, names, position, velocity, effort, frame_id)
    return bytes(TYPESTORE.serialize_cdr(msg, JOINT_STATE, little_endian=little_endian))


def stream(count: int, rate: float = 100.0, t0: float = 1_700_000_000.0, offset: float = 0.0) -> list[bytes]:
    """``count`` JointStates at ``rate`` Hz; joint j of message k sits at ``0.01 * k + 0.1 * j + offset`` rad."""
    messages = []
    for k in range(count):
        t = t0 + k / rate
        sec = int(t)
        position = [0.01 * k + 0.1 * j + offset for j in range(len(JOINT_NAMES))]
        messages.append(joint_state(sec, round((t - sec) * 1e9), JOINT_NAMES, position, [0.5] * 6, [0.1] * 6))
    return messages


def write_bag(root: Path, task: str, messages: Iterable[tuple[str, str, bytes, int]], **metadata) -> Path:
    """An episode bag holding ``(topic, type, data, t_ns)`` messages, written by the recorder's writer."""
    path = next_episode_path(root, task)
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id=metadata.pop("robot_id", "test_arm"), task=task,
                                             **metadata)) as writer:
        for topic, msgtype, data, stamp in messages:
            writer.write(topic, msgtype, data, stamp)
    return path


def stamp_ns(data: bytes) -> int:
    msg: Any = TYPESTORE.deserialize_cdr(data, JOINT_STATE)
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
