"""A specialised, vectorised CDR decoder for ``sensor_msgs/msg/JointState``.

Wire layout (XCDR1 "plain CDR", as rmw_fastrtps and rosbags write it): a 4-byte encapsulation
header (``00 01`` little-endian, ``00 00`` big-endian, 2 option bytes), then, with alignment counted
from the end of that header::

    int32 stamp.sec, uint32 stamp.nanosec
    string frame_id            uint32 length (including NUL), bytes
    string[] name              uint32 count, then per string: align 4, uint32 length, bytes
    float64[] position         align 4, uint32 count, align 8 (only if count > 0), float64 * count
    float64[] velocity, effort as position

A bag's joint states almost always share one layout (same frame id, names and array lengths), so
the decoder parses the layout of one message, finds every message of the same size whose
layout-defining bytes (encapsulation, frame id, names, the three counts; not the padding, which
rmw_fastrtps leaves uninitialised) are identical with one vectorised comparison, and reads stamps and
arrays of all of them at once through a structured numpy dtype with the computed offsets. Messages that differ start their own group; messages that do
not parse are counted as corrupt and skipped. Values are bit-identical to ``deserialize_cdr``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = [
    "CdrError",
    "JointStateLayout",
    "JointStateGroup",
    "JointStateBatch",
    "JointStateFields",
    "parse_layout",
    "decode_joint_state",
    "decode_joint_states",
    "pack_messages",
]

_HEADER = 4  # encapsulation header; CDR alignment is relative to its end
_ARRAYS = ("position", "velocity", "effort")


class CdrError(ValueError):
    """Bytes that are not a well-formed CDR ``sensor_msgs/msg/JointState``."""


@dataclass(frozen=True)
class JointStateLayout:
    """Byte layout shared by a group of messages (offsets from the start of the serialized message)."""

    size: int  # message length in bytes
    little_endian: bool
    frame_id: str
    names: tuple[str, ...]
    counts: tuple[int, ...]  # element counts of position, velocity, effort
    offsets: tuple[int, ...]  # byte offset of each array's first float64
    key_slices: tuple[tuple[int, int], ...]  # bytes that fix the layout (compared across messages), padding excluded

    def dtype(self) -> np.dtype:
        order = "<" if self.little_endian else ">"
        names, offsets = ["sec", "nanosec"], [4, 8]
        formats: list[Any] = [order + "i4", order + "u4"]
        for name, count, offset in zip(_ARRAYS, self.counts, self.offsets, strict=True):
            if count:
                names.append(name)
                formats.append((order + "f8", (count,)))
                offsets.append(offset)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": self.size})


@dataclass
class JointStateFields:
    """One decoded message (the fields of ``sensor_msgs/msg/JointState``)."""

    sec: int
    nanosec: int
    frame_id: str
    name: list[str]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass
class JointStateGroup:
    """Messages sharing one layout: ``rows`` index into the batch; arrays are ``(len(rows), count)``."""

    layout: JointStateLayout
    rows: np.ndarray  # int64 indices of the messages in the batch, ascending
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass
class JointStateBatch:
    """``n`` decoded messages: stamps for all, arrays per layout group, corrupt ones listed."""

    count: int
    sec: np.ndarray  # (n,) int64; 0 where corrupt
    nanosec: np.ndarray  # (n,) int64; 0 where corrupt
    groups: list[JointStateGroup] = field(default_factory=list)
    corrupt: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # indices of skipped messages
    errors: list[str] = field(default_factory=list)  # the first few reasons, for reports

    @property
    def valid(self) -> np.ndarray:
        mask = np.ones(self.count, dtype=bool)
        mask[self.corrupt] = False
        return mask

    def message(self, index: int) -> JointStateFields:
        """Message ``index`` as plain fields (for tests and debugging; the groups are the fast path)."""
        for group in self.groups:
            where = np.searchsorted(group.rows, index)
            if where < len(group.rows) and group.rows[where] == index:
                return JointStateFields(int(self.sec[index]), int(self.nanosec[index]), group.layout.frame_id,
                                        list(group.layout.names), group.position[where], group.velocity[where],
                                        group.effort[where])
        raise CdrError(f"message {index} is corrupt or out of range")


def _align(offset: int, size: int) -> int:
    rel = offset - _HEADER
    return _HEADER + ((rel + size - 1) // size) * size


def parse_layout(raw: bytes | memoryview | np.ndarray) -> JointStateLayout:
    """The layout of one serialized JointState; raises :class:`CdrError` if it is not well-formed."""
    raw = bytes(raw)
    size = len(raw)
    if size < _HEADER + 12:
        raise CdrError(f"{size} bytes is shorter than any JointState")
    if raw[0] != 0 or raw[1] not in (0, 1):
        raise CdrError(f"unsupported encapsulation {raw[:2].hex()} (plain CDR 0000/0001 expected)")
    little = raw[1] == 1
    u32 = struct.Struct("<I" if little else ">I").unpack_from

    def count_at(offset: int, unit: int) -> int:
        if offset + 4 > size:
            raise CdrError(f"truncated at byte {offset} of {size}")
        value = u32(raw, offset)[0]
        if value * unit > size - offset - 4:
            raise CdrError(f"length {value} at byte {offset} overruns the {size}-byte message")
        return value

    keys = [(0, 2)]  # byte ranges that fix the layout; padding is left out (rmw_fastrtps leaves it uninitialised)
    flen = count_at(12, 1)
    frame_id = _string(raw, 16, flen)
    keys.append((12, 16 + flen))
    offset = _align(16 + flen, 4)
    names = []
    count = count_at(offset, 4)
    keys.append((offset, offset + 4))
    offset += 4
    for _ in range(count):
        offset = _align(offset, 4)
        slen = count_at(offset, 1)
        names.append(_string(raw, offset + 4, slen))
        keys.append((offset, offset + 4 + slen))
        offset += 4 + slen
    counts, offsets = [], []
    for _ in _ARRAYS:
        offset = _align(offset, 4)
        n = count_at(offset, 1)
        keys.append((offset, offset + 4))
        offset += 4
        if n:
            offset = _align(offset, 8)
        if offset + 8 * n > size:
            raise CdrError(f"float64[{n}] at byte {offset} overruns the {size}-byte message")
        counts.append(n)
        offsets.append(offset)
        offset += 8 * n
    return JointStateLayout(size, little, frame_id, tuple(names), tuple(counts), tuple(offsets), _merge(keys))


def _merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, stop in ranges:
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
    return tuple(merged)


def _string(raw: bytes, offset: int, length: int) -> str:
    if length == 0:
        return ""
    if raw[offset + length - 1] != 0:
        raise CdrError(f"string at byte {offset} is not NUL-terminated")
    try:
        return raw[offset:offset + length - 1].decode("utf-8")
    except UnicodeDecodeError as err:
        raise CdrError(f"string at byte {offset} is not UTF-8: {err}") from err


def decode_joint_state(raw: bytes | memoryview) -> JointStateFields:
    """Decode one message (scalar path)."""
    layout = parse_layout(raw)
    record = np.frombuffer(bytes(raw), dtype=layout.dtype(), count=1)[0]
    arrays = [np.array(record[n], dtype=np.float64) if c else np.zeros(0) for n, c in zip(_ARRAYS, layout.counts, strict=True)]
    return JointStateFields(int(record["sec"]), int(record["nanosec"]), layout.frame_id, list(layout.names), *arrays)


def pack_messages(messages: Sequence[bytes | memoryview]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(buffer, starts, lengths)`` for a list of messages, the form :func:`decode_joint_states` takes."""
    lengths = np.fromiter((len(m) for m in messages), dtype=np.int64, count=len(messages))
    starts = np.zeros(len(messages), dtype=np.int64)
    if len(messages) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    buffer = np.frombuffer(b"".join(messages), dtype=np.uint8)
    return buffer, starts, lengths


def decode_joint_states(buffer: np.ndarray | bytes, starts: np.ndarray, lengths: np.ndarray,
                        max_errors: int = 10) -> JointStateBatch:
    """Decode ``n`` messages stored in ``buffer`` at ``starts`` with ``lengths`` (e.g. straight from an MCAP file)."""
    data = np.frombuffer(buffer, dtype=np.uint8) if not isinstance(buffer, np.ndarray) else buffer
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n = len(starts)
    batch = JointStateBatch(n, np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    corrupt: list[np.ndarray] = []
    bad_extent = (starts < 0) | (lengths < 0) | (starts + lengths > len(data))
    if bad_extent.any():
        corrupt.append(np.flatnonzero(bad_extent))
        batch.errors.append(f"{int(bad_extent.sum())} messages lie outside the buffer")
    for size in np.unique(lengths[~bad_extent]).tolist():
        rows = np.flatnonzero((lengths == size) & ~bad_extent)
        if size == 0:
            corrupt.append(rows)
            batch.errors.append(f"{len(rows)} empty messages")
            continue
        _decode_same_size(batch, rows, _gather(data, starts[rows], size), corrupt, max_errors)
    batch.groups.sort(key=lambda g: int(g.rows[0]))
    batch.corrupt = np.sort(np.concatenate(corrupt)) if corrupt else np.zeros(0, dtype=np.int64)
    return batch


def _gather(data: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """``(len(starts), size)`` bytes: a view when the messages lie back to back, else one row gather over a
    sliding-window view (a memcpy per row; indexing every byte separately is ~100x slower)."""
    count = len(starts)
    first = int(starts[0])
    if count == 1 or (np.diff(starts) == size).all():
        return data[first:first + size * count].reshape(count, size)
    return sliding_window_view(data, size)[starts]


def _key_words(matrix: np.ndarray, slices: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The layout-defining bytes of each row as uint64 words, for a fast row comparison (one gather;
    the index is padded to whole words with byte 0, itself part of every key)."""
    index = np.concatenate([np.arange(start, stop) for start, stop in slices])
    index = np.concatenate([index, np.zeros(-len(index) % 8, dtype=index.dtype)])
    return np.take(matrix, index, axis=1).view(np.uint64)


def _decode_same_size(batch: JointStateBatch, rows: np.ndarray, matrix: np.ndarray, corrupt: list[np.ndarray],
                      max_errors: int) -> None:
    """Split equal-size messages into layout groups (one vectorised key comparison per layout)."""
    pending: np.ndarray = np.arange(len(rows))
    while len(pending):
        first = pending[0]
        try:
            layout = parse_layout(matrix[first].tobytes())
        except CdrError as err:
            corrupt.append(rows[[first]])
            if len(batch.errors) < max_errors:
                batch.errors.append(f"message {int(rows[first])}: {err}")
            pending = pending[1:]
            continue
        keys = _key_words(matrix if len(pending) == len(matrix) else matrix[pending], layout.key_slices)
        same = (keys == keys[0]).all(axis=1)
        members = pending[same]
        pending = pending[~same]
        block = matrix if len(members) == len(matrix) else matrix[members]
        records = block.view(layout.dtype()).reshape(-1)
        index = rows[members]
        batch.sec[index] = records["sec"]
        batch.nanosec[index] = records["nanosec"]
        arrays = [np.array(records[name], dtype=np.float64) if count else np.zeros((len(members), 0))
                  for name, count in zip(_ARRAYS, layout.counts, strict=True)]
        batch.groups.append(JointStateGroup(layout, index, *arrays))
