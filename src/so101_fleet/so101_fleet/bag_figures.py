"""What the catalogue needs of one MCAP file, read from as little of it as possible.

A complete MCAP (closed by the recorder: summary section and footer) describes itself in its
summary: schemas, channels, the statistics record (message counts per channel, first and last log
time) and one chunk index per chunk, which points at the chunk's message index records. From those
:func:`read_bag_figures` takes the topics, counts and duration, the receive times of the state topic
(its message index entries: no payload is touched) and the ``/diagnostics`` payloads (one message a
second; found through their index entries), whose status levels are read by
:func:`diagnostic_levels` without building message objects. Nothing else of the file is read, so
the cost per bag does not grow with the number of joint-state messages' payloads.

A file without a usable summary (the recorder was killed: no footer; or compressed chunks, whose
messages cannot be located without decompressing) falls back to
:func:`so101_recorder.mcap_scan.scan_mcap`, which walks the records and recovers what the complete
chunks hold. Both paths give the same :class:`BagFigures` for a complete file.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mcap.exceptions import McapError
from mcap.reader import make_reader

from so101_fleet.recorder_adapter import scan_mcap

__all__ = ["BagFigures", "read_bag_figures", "figures_from_summary", "figures_from_scan", "diagnostic_levels",
           "DIAGNOSTIC_ARRAY"]

DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"
_MESSAGE_HEADER = 9 + 2 + 4 + 8 + 8  # record opcode+length, channel, sequence, log and publish time
_OP_MESSAGE_INDEX = 0x07
_OP_MESSAGE = 0x05


@dataclass
class BagFigures:
    """One MCAP file's description (see the module doc)."""

    topics: dict[str, str] = field(default_factory=dict)  # topic → type (first channel of a topic wins)
    counts: dict[str, int] = field(default_factory=dict)  # topic → messages
    first_ns: int | None = None  # first and last message log (receive) time
    last_ns: int | None = None
    state_times: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # log times of the state topic
    diagnostics: list[bytes] = field(default_factory=list)  # CDR payloads of the diagnostics topic
    truncated: bool = False
    problems: list[str] = field(default_factory=list)


def read_bag_figures(path: Path, state_topic: str, diagnostics_topic: str) -> BagFigures:
    """:class:`BagFigures` of ``path``; raises :class:`BagReadError` for a file that is not MCAP at all."""
    figures = figures_from_summary(path, state_topic, diagnostics_topic)
    return figures if figures is not None else figures_from_scan(path, state_topic, diagnostics_topic)


def figures_from_summary(path: Path, state_topic: str, diagnostics_topic: str) -> BagFigures | None:
    """The figures from the summary section, or None when the file has no usable one."""
    try:
        with path.open("rb") as handle:
            summary = make_reader(handle).get_summary()
            if summary is None or summary.statistics is None or not summary.chunk_indexes:
                return None
            if any(index.compression for index in summary.chunk_indexes):
                return None
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (McapError, OSError, ValueError, struct.error):
        return None  # no footer or a damaged summary: walk the file instead
    with mapped:
        figures = BagFigures()
        stats = summary.statistics
        topic_of = {}
        for cid, channel in sorted(summary.channels.items()):
            schema = summary.schemas.get(channel.schema_id)
            figures.topics.setdefault(channel.topic, schema.name if schema else "")
            topic_of[cid] = channel.topic
            figures.counts.setdefault(channel.topic, 0)
        for cid, count in stats.channel_message_counts.items():
            if cid in topic_of:
                figures.counts[topic_of[cid]] += count
        if stats.message_count:
            figures.first_ns, figures.last_ns = stats.message_start_time, stats.message_end_time
        state = [cid for cid, topic in topic_of.items() if topic == state_topic]
        diagnostics = [cid for cid, topic in topic_of.items() if topic == diagnostics_topic
                       and figures.topics[diagnostics_topic] == DIAGNOSTIC_ARRAY]
        times = []
        try:
            for index in summary.chunk_indexes:
                for cid in state:
                    times.append(_index_entries(mapped, index.message_index_offsets.get(cid), cid)[:, 0])
                for cid in diagnostics:
                    entries = _index_entries(mapped, index.message_index_offsets.get(cid), cid)
                    records = index.chunk_start_offset + index.chunk_length - index.compressed_size
                    figures.diagnostics.extend(_payload(mapped, records + int(offset), records + index.chunk_length)
                                               for offset in entries[:, 1].tolist())
        except ValueError:
            return None  # an index that does not check out: the record walk decides
        if times:
            figures.state_times = np.sort(np.concatenate(times).astype(np.int64))
        return figures


def _index_entries(mapped: mmap.mmap, offset: int | None, cid: int) -> np.ndarray:
    """(log time, offset in the chunk's records) of one channel's message index record, uint64 × 2."""
    if offset is None:
        return np.zeros((0, 2), np.uint64)
    if offset + 15 > len(mapped) or mapped[offset] != _OP_MESSAGE_INDEX:
        raise ValueError(f"no message index record at byte {offset}")
    found_cid, nbytes = struct.unpack_from("<HI", mapped, offset + 9)
    if found_cid != cid or nbytes % 16 or offset + 15 + nbytes > len(mapped):
        raise ValueError(f"message index at byte {offset} is not channel {cid}'s")
    return np.frombuffer(mapped, np.uint64, nbytes // 8, offset + 15).reshape(-1, 2).copy()  # the map closes after


def _payload(mapped: mmap.mmap, start: int, chunk_end: int) -> bytes:
    """The data of the message record at ``start`` (an uncompressed chunk's records end at ``chunk_end``)."""
    if start + _MESSAGE_HEADER > chunk_end or mapped[start] != _OP_MESSAGE:
        raise ValueError(f"no message record at byte {start}")
    end = start + 9 + struct.unpack_from("<Q", mapped, start + 1)[0]
    if end > chunk_end:
        raise ValueError(f"message record at byte {start} overruns its chunk")
    return mapped[start + _MESSAGE_HEADER:end]


def figures_from_scan(path: Path, state_topic: str, diagnostics_topic: str) -> BagFigures:
    scan = scan_mcap(path)
    figures = BagFigures(truncated=scan.truncated, problems=[f"{path.name}: {p}" for p in scan.problems])
    for topic, msgtype in scan.topics().items():
        figures.topics[topic] = msgtype
        messages = scan.topic_messages(topic)
        figures.counts[topic] = len(messages)
        if len(messages):
            lo, hi = int(messages.log_time.min()), int(messages.log_time.max())
            figures.first_ns = lo if figures.first_ns is None else min(figures.first_ns, lo)
            figures.last_ns = hi if figures.last_ns is None else max(figures.last_ns, hi)
        if topic == state_topic:
            figures.state_times = np.sort(messages.log_time)
        if topic == diagnostics_topic and msgtype == DIAGNOSTIC_ARRAY:
            figures.diagnostics = [scan.data(s, n) for s, n in
                                   zip(messages.starts.tolist(), messages.lengths.tolist(), strict=True)]
    return figures


class _Cdr:
    """A cursor over one CDR payload (after its 4-byte encapsulation header, where alignment counts from)."""

    def __init__(self, payload: bytes) -> None:
        if len(payload) < 4 or payload[0] != 0 or payload[1] not in (0, 1):
            raise ValueError("not a plain CDR payload")
        self.data = memoryview(payload)[4:]
        self.u32 = struct.Struct("<I" if payload[1] == 1 else ">I")
        self.pos = 0

    def uint32(self) -> int:
        self.pos = (self.pos + 3) & ~3
        value: int = self.u32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def skip_string(self) -> None:
        length = self.uint32()  # read first: it moves the cursor past the length field
        self.pos += length
        if self.pos > len(self.data):
            raise ValueError("a string runs past the end of the message")

    def byte(self) -> int:
        value = self.data[self.pos]
        self.pos += 1
        return value


def diagnostic_levels(payload: bytes) -> list[int]:
    """The ``level`` of each status of a CDR ``diagnostic_msgs/msg/DiagnosticArray``, reading nothing else
    (the strings and key/values are skipped by their lengths); raises ValueError for a malformed payload."""
    cdr = _Cdr(payload)
    levels = []
    try:
        cdr.uint32()  # header.stamp.sec
        cdr.uint32()  # header.stamp.nanosec
        cdr.skip_string()  # header.frame_id
        for _ in range(cdr.uint32()):  # status[]
            levels.append(cdr.byte())  # level
            for _string in range(3):  # name, message, hardware_id
                cdr.skip_string()
            for _value in range(cdr.uint32()):  # values[]: key, value
                cdr.skip_string()
                cdr.skip_string()
    except (struct.error, IndexError) as err:
        raise ValueError(f"the message ends early: {err}") from err
    return levels
