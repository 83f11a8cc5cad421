"""The specialised JointState decoder agrees bit for bit with rosbags' generic ``deserialize_cdr``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recorder_helpers import JOINT_STATE, TYPESTORE, joint_state, joint_state_msg

from so101_recorder.cdr import CdrError, decode_joint_state, decode_joint_states, pack_messages, parse_layout

_text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12)
_floats = st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=9)


@st.composite
def joint_states(draw):
    msg = joint_state_msg(draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(0, 2**32 - 1)),
                          draw(st.lists(_text, max_size=8)), draw(_floats), draw(_floats), draw(_floats),
                          frame_id=draw(_text))
    return msg, draw(st.booleans())


def assert_same(fields, reference) -> None:
    assert fields.sec == reference.header.stamp.sec
    assert fields.nanosec == reference.header.stamp.nanosec
    assert fields.frame_id == reference.header.frame_id
    assert fields.name == list(reference.name)
    for key in ("position", "velocity", "effort"):
        ours, theirs = getattr(fields, key), np.asarray(getattr(reference, key), dtype=np.float64)
        assert ours.dtype == np.float64 and ours.shape == theirs.shape, key
        assert np.array_equal(ours.view(np.uint64), theirs.view(np.uint64)), key  # bit-exact, NaN payloads too


@settings(max_examples=150, deadline=None)
@given(st.lists(joint_states(), min_size=1, max_size=12))
def test_batch_and_scalar_decoders_match_deserialize_cdr(items):
    raws = [bytes(TYPESTORE.serialize_cdr(msg, JOINT_STATE, little_endian=le)) for msg, le in items]
    batch = decode_joint_states(*pack_messages(raws))
    assert len(batch.corrupt) == 0
    for i, raw in enumerate(raws):
        reference: Any = TYPESTORE.deserialize_cdr(raw, JOINT_STATE)
        assert_same(decode_joint_state(raw), reference)
        assert_same(batch.message(i), reference)
        assert batch.sec[i] == reference.header.stamp.sec and batch.nanosec[i] == reference.header.stamp.nanosec


def test_many_random_messages_with_mixed_layouts_in_one_batch():
    rng = np.random.default_rng(7)
    names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    raws = []
    for _ in range(3000):
        count = int(rng.integers(0, 7))
        order = list(rng.permutation(names)[:count]) if rng.random() < 0.3 else names[:count]
        lengths = [len(order) if rng.random() < 0.7 else int(rng.integers(0, 4)) for _ in range(3)]
        position, velocity, effort = (rng.normal(size=n) * 10.0 ** rng.integers(-300, 300) for n in lengths)
        raws.append(joint_state(int(rng.integers(0, 2**31)), int(rng.integers(0, 10**9)), order,
                                position, velocity, effort, frame_id="base_link" if rng.random() < 0.5 else "", little_endian=bool(rng.random() < 0.9)))
    batch = decode_joint_states(*pack_messages(raws))
    assert len(batch.corrupt) == 0 and len(batch.groups) > 10
    for i in range(0, len(raws), 7):
        assert_same(batch.message(i), TYPESTORE.deserialize_cdr(raws[i], JOINT_STATE))


def test_rclpy_wire_bytes_decode_like_rclpy_wrote_them():
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    raws, sent = [], []
    for k in range(20):
        msg = JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 100 + k, 5 * k, "f" * (k % 3)
        msg.name = [f"j{i}" for i in range(k % 7)]
        msg.position = [k + i / 10 for i in range(k % 7)]
        msg.velocity = [] if k % 2 else [float(-i) for i in range(k % 7)]
        raws.append(serialize_message(msg))
        sent.append(msg)
    batch = decode_joint_states(*pack_messages(raws))
    for i, msg in enumerate(sent):
        got = batch.message(i)
        assert (got.sec, got.nanosec, got.frame_id, got.name) == (msg.header.stamp.sec, msg.header.stamp.nanosec,
                                                                  msg.header.frame_id, list(msg.name))
        assert got.position.tolist() == list(msg.position) and got.velocity.tolist() == list(msg.velocity)
        assert got.effort.size == 0


def test_corrupt_messages_are_skipped_and_counted():
    good = [joint_state(1, k, position=[float(k)] * 6) for k in range(50)]
    cut = good[3][:40]  # truncated payload
    bad_encapsulation = b"\x07\x07" + good[4][2:]
    overrun = bytearray(good[5])
    overrun[12:16] = (10_000).to_bytes(4, "little")  # frame_id length beyond the message
    zeros = bytes(len(good[0]))  # reads as a valid, empty big-endian JointState followed by padding
    raws = good[:10] + [cut, bad_encapsulation, bytes(overrun), zeros, b""] + good[10:]
    batch = decode_joint_states(*pack_messages(raws))
    assert batch.corrupt.tolist() == [10, 11, 12, 14]
    assert len(batch.errors) == 4
    empty = batch.message(13)
    assert (empty.name, empty.position.size, empty.frame_id) == ([], 0, "")
    decoded = [batch.message(i).position[0] for i in [*range(10), *range(15, len(raws))]]
    assert decoded == [float(k) for k in range(50)]


def test_layout_errors_are_cdr_errors():
    raw = joint_state(1, 2, position=[1.0] * 6)
    with pytest.raises(CdrError):
        parse_layout(raw[:-8])
    with pytest.raises(CdrError):
        parse_layout(raw[:10])
    bad_string = bytearray(joint_state(1, 2, names=["a"], frame_id="ab"))
    bad_string[18] = ord("x")  # frame id loses its NUL terminator
    with pytest.raises(CdrError, match="NUL"):
        parse_layout(bytes(bad_string))


def test_padding_bytes_do_not_split_layout_groups():
    """rmw_fastrtps leaves alignment padding uninitialised: messages must group by layout, not padding."""
    rng = np.random.default_rng(3)
    raws = [joint_state(5, k, names=["a", "bc", "def"], position=[k, 1.0, 2.0], velocity=[3.0] * 3, frame_id="xy")
            for k in range(200)]
    layout = parse_layout(raws[0])
    used = np.zeros(layout.size, dtype=bool)
    used[4:12] = True  # stamp
    for start, stop in layout.key_slices:
        used[start:stop] = True
    for offset, count in zip(layout.offsets, layout.counts, strict=True):
        used[offset:offset + 8 * count] = True
    padding = np.flatnonzero(~used)
    assert len(padding) > 3
    noisy = []
    for raw in raws:
        buf = np.frombuffer(raw, dtype=np.uint8).copy()
        buf[padding] = rng.integers(0, 256, len(padding))
        noisy.append(buf.tobytes())
    batch = decode_joint_states(*pack_messages(noisy))
    assert len(batch.groups) == 1 and len(batch.corrupt) == 0
    np.testing.assert_array_equal(batch.groups[0].position[:, 0], np.arange(200))
    for i in (0, 77, 199):
        assert_same(batch.message(i), TYPESTORE.deserialize_cdr(noisy[i], JOINT_STATE))
