"""Find every message in an MCAP file without copying or decoding it, tolerating a missing footer.

The file is memory-mapped and walked record by record at the top level (chunks, message indexes,
...: a few records per chunk). A chunk's messages are located through the message index records
that follow it (vectorised: numpy over the index entries); the bytes between indexed messages,
where schema and channel records live, are walked record by record. A chunk without intact
indexes (the last one of a killed recorder) is walked record by record. Reading stops at the first
record that runs past the end of the file: what comes before it is returned (for an uncompressed
chunk cut by the end of the file, its complete messages too), and the result says where and why it
stopped. Uncompressed chunks are read in place; zstd/lz4 chunks are decompressed.
"""

from __future__ import annotations

import mmap
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from so101_recorder.errors import BagReadError, io_error

__all__ = ["MCAP_MAGIC", "McapSchema", "McapChannel", "ChannelMessages", "McapScan", "scan_mcap"]

MCAP_MAGIC = b"\x89MCAP0\r\n"
_OP_HEADER, _OP_FOOTER, _OP_SCHEMA, _OP_CHANNEL, _OP_MESSAGE, _OP_CHUNK, _OP_MESSAGE_INDEX = 1, 2, 3, 4, 5, 6, 7
_OP_METADATA, _OP_DATA_END = 0x0C, 0x0F
_MESSAGE_HEADER = 9 + 2 + 4 + 8 + 8  # record opcode+length, channel, sequence, log and publish time

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_MSG = struct.Struct("<HIQ").unpack_from  # channel id, sequence, log time


@dataclass(frozen=True)
class McapSchema:
    id: int
    name: str  # ROS type, e.g. sensor_msgs/msg/JointState
    encoding: str  # ros2msg / ros2idl
    data: bytes  # message definition


@dataclass(frozen=True)
class McapChannel:
    id: int
    schema_id: int
    topic: str
    message_encoding: str  # cdr
    metadata: dict[str, str]  # rosbag2 puts offered_qos_profiles here


@dataclass
class ChannelMessages:
    """Where one channel's messages are in :attr:`McapScan.buffer`, in file order."""

    log_time: np.ndarray  # int64 ns (the bag timestamp: receive time)
    starts: np.ndarray  # int64 byte offset of each message's data
    lengths: np.ndarray  # int64 byte length of each message's data
    order: np.ndarray  # int64 position of each message in the whole file (across channels)

    def __len__(self) -> int:
        return len(self.starts)


@dataclass
class McapScan:
    path: Path
    buffer: np.ndarray  # uint8: the file (mapped), followed by decompressed chunks if any
    schemas: dict[int, McapSchema] = field(default_factory=dict)
    channels: dict[int, McapChannel] = field(default_factory=dict)
    messages: dict[int, ChannelMessages] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)  # metadata records by name
    complete: bool = False  # data end, footer and closing magic all present
    stopped_at: int | None = None  # byte offset where reading stopped early (truncated / damaged)
    problems: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return not self.complete

    @property
    def message_count(self) -> int:
        return sum(len(m) for m in self.messages.values())

    def msgtype(self, channel_id: int) -> str:
        schema = self.schemas.get(self.channels[channel_id].schema_id)
        return schema.name if schema else ""

    def topics(self) -> dict[str, str]:
        """Topic → type of every channel (first type wins if a topic had several)."""
        found: dict[str, str] = {}
        for cid, channel in sorted(self.channels.items()):
            found.setdefault(channel.topic, self.msgtype(cid))
        return found

    def channel_ids(self, topic: str) -> list[int]:
        return [cid for cid, channel in sorted(self.channels.items()) if channel.topic == topic]

    def topic_messages(self, topic: str) -> ChannelMessages:
        """All messages of ``topic`` (every channel of it), in file order."""
        parts = [self.messages[cid] for cid in self.channel_ids(topic) if cid in self.messages]
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return ChannelMessages(empty, empty, empty, empty)
        if len(parts) == 1:
            return parts[0]
        merged = [np.concatenate([getattr(p, f) for p in parts]) for f in ("log_time", "starts", "lengths", "order")]
        index = np.argsort(merged[3], kind="stable")
        return ChannelMessages(*(a[index] for a in merged))

    def data(self, start: int, length: int) -> bytes:
        return self.buffer[start:start + length].tobytes()


def scan_mcap(path: Path | str) -> McapScan:
    """Locate all schemas, channels and messages of an MCAP file (see the module doc)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            mapped: mmap.mmap | bytes = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    except OSError as err:
        raise io_error("read bag file", path, err, BagReadError) from err
    if size < len(MCAP_MAGIC) or mapped[:8] != MCAP_MAGIC:
        raise BagReadError(f"{path} is not an MCAP file (bad or missing magic, {size} bytes)")
    return _Scanner(path, mapped, size).run()


class _Scanner:
    def __init__(self, path: Path, mapped: mmap.mmap | bytes, size: int) -> None:
        self.raw = mapped
        self.size = size
        self.file = np.frombuffer(mapped, dtype=np.uint8)
        self.result = McapScan(path, self.file)
        self.extra: list[bytes] = []  # decompressed chunk contents, addressed after the file
        self.extra_size = 0
        self.found: dict[int, list[tuple[np.ndarray, ...]]] = defaultdict(list)
        self.order = 0

    def run(self) -> McapScan:
        pos, data_end = 8, False
        chunk: tuple[int, int, bytes | mmap.mmap | None] | None = None  # (base, length, source) of the last chunk
        indexes: list[tuple[int, np.ndarray]] = []
        while pos < self.size:
            if pos + 9 > self.size:
                self._stop(pos, "a record header is cut off")
                break
            op = self.raw[pos]
            length = _U64(self.raw, pos + 1)[0]
            body, end = pos + 9, pos + 9 + length
            if end > self.size:
                if op == _OP_CHUNK:  # the chunk being written when the recorder died: keep what it holds
                    if chunk is not None:
                        self._chunk_messages(*chunk, indexes)
                        chunk, indexes = None, []
                    readable_end = self._salvage_chunk(body)
                    if readable_end is not None:
                        self._stop(readable_end, f"the file ends inside the chunk starting at byte {pos}")
                        break
                self._stop(pos, f"record 0x{op:02x} of {length} bytes runs past the end of the file")
                break
            if op == _OP_MESSAGE_INDEX and chunk is not None:
                cid, nbytes = _U16(self.raw, body)[0], _U32(self.raw, body + 2)[0]
                if 6 + nbytes <= length and nbytes % 16 == 0:
                    entries = self.file[body + 6:body + 6 + nbytes].view(np.uint64).reshape(-1, 2) if nbytes else np.zeros((0, 2), np.uint64)
                    indexes.append((cid, entries))
                pos = end
                continue
            if chunk is not None:
                self._chunk_messages(*chunk, indexes)
                chunk, indexes = None, []
            if op == _OP_CHUNK:
                chunk = self._open_chunk(body, end)
            elif op in (_OP_SCHEMA, _OP_CHANNEL, _OP_METADATA):
                self._definition(op, self.raw, body, end)
            elif op == _OP_MESSAGE:  # unchunked file
                self._walk(self.raw, pos, end, base=0)
            elif op == _OP_DATA_END:
                data_end = True
                break
            elif op == _OP_FOOTER:
                break
            pos = end
        if chunk is not None:
            self._chunk_messages(*chunk, indexes)
        self.result.complete = data_end and self.result.stopped_at is None and self._has_footer()
        if self.result.stopped_at is None and not self.result.complete:
            self._stop(self.size, "the file ends without the MCAP summary and footer")
        self._finish()
        return self.result

    # -- records ---------------------------------------------------------------------------------
    def _definition(self, op: int, buf: bytes | mmap.mmap, body: int, end: int) -> None:
        try:
            if op == _OP_SCHEMA:
                sid = _U16(buf, body)[0]
                name, pos = _string(buf, body + 2)
                encoding, pos = _string(buf, pos)
                dlen = _U32(buf, pos)[0]
                self.result.schemas[sid] = McapSchema(sid, name, encoding, bytes(buf[pos + 4:pos + 4 + dlen]))
            elif op == _OP_CHANNEL:
                cid, sid = _U16(buf, body)[0], _U16(buf, body + 2)[0]
                topic, pos = _string(buf, body + 4)
                encoding, pos = _string(buf, pos)
                self.result.channels[cid] = McapChannel(cid, sid, topic, encoding, _string_map(buf, pos)[0])
            elif op == _OP_METADATA:
                name, pos = _string(buf, body)
                self.result.metadata[name] = _string_map(buf, pos)[0]
        except (struct.error, UnicodeDecodeError, IndexError) as err:
            self.result.problems.append(f"unreadable record 0x{op:02x} at byte {body - 9}: {err}")

    def _open_chunk(self, body: int, end: int) -> tuple[int, int, bytes | mmap.mmap | None] | None:
        try:
            uncompressed = _U64(self.raw, body + 16)[0]
            compression, pos = _string(self.raw, body + 28)
            rlen = _U64(self.raw, pos)[0]
            start = pos + 8
            if start + rlen > end:
                raise ValueError("chunk records overrun the chunk")
            if not compression:
                return start, rlen, None
            blob = _decompress(compression, bytes(self.raw[start:start + rlen]), uncompressed)
        except (ValueError, struct.error, UnicodeDecodeError) as err:
            self.result.problems.append(f"unreadable chunk at byte {body - 9}: {err}")
            return None
        base = self.size + self.extra_size
        self.extra.append(blob)
        self.extra_size += len(blob)
        return base, len(blob), blob

    def _salvage_chunk(self, body: int) -> int | None:
        """The complete records of an uncompressed chunk cut by the end of the file; where they end
        (None when nothing could be read from it)."""
        try:
            compression, pos = _string(self.raw, body + 28)
            records = pos + 8
        except (struct.error, UnicodeDecodeError, IndexError):
            return None
        if compression:
            self.result.problems.append(f"the {compression} chunk at byte {body - 9} is cut: its messages are lost")
            return None
        if records >= self.size:
            return None
        before = sum(len(t) for parts in self.found.values() for t, *_ in parts)
        end = self._walk(self.raw, records, self.size, base=0)
        found = sum(len(t) for parts in self.found.values() for t, *_ in parts) - before
        self.result.problems.append(f"{found} complete messages read from the chunk cut at byte {self.size}")
        return end

    def _chunk_messages(self, base: int, length: int, source: bytes | mmap.mmap | None, indexes: list[tuple[int, np.ndarray]]) -> None:
        """Messages of one chunk: from its indexes when they check out, else by walking it."""
        buf, offset = (self.raw, base) if source is None else (source, 0)
        view = self.file[base:base + length] if source is None else np.frombuffer(source, dtype=np.uint8)
        located = self._from_indexes(view, length, indexes) if indexes else None
        if located is None:
            self._walk(buf, offset, offset + length, base=base - offset)
            return
        cids, times, offs, lens = located
        ends = offs + _MESSAGE_HEADER + lens
        gap_starts = np.concatenate(([0], ends))
        gap_ends = np.concatenate((offs, [length]))
        for gs, ge in zip(gap_starts[gap_starts < gap_ends].tolist(), gap_ends[gap_starts < gap_ends].tolist(), strict=True):
            self._walk(buf, offset + gs, offset + ge, base=base - offset)
        self._add(cids, times, base + offs + _MESSAGE_HEADER, lens)

    def _from_indexes(self, view: np.ndarray, length: int, indexes: list[tuple[int, np.ndarray]]):
        cids = np.concatenate([np.full(len(e), cid, dtype=np.int64) for cid, e in indexes])
        entries = np.concatenate([e for _, e in indexes]).astype(np.int64)
        order = np.argsort(entries[:, 1], kind="stable")
        cids, times, offs = cids[order], entries[order, 0], entries[order, 1]
        if len(offs) == 0 or offs.min() < 0 or (offs + _MESSAGE_HEADER).max() > length:
            return None
        if (view[offs] != _OP_MESSAGE).any():
            return None
        header = np.lib.stride_tricks.sliding_window_view(view, 11)[offs]
        rec_len = np.ascontiguousarray(header[:, 1:9]).view("<u8").ravel().astype(np.int64)
        rec_cid = np.ascontiguousarray(header[:, 9:11]).view("<u2").ravel()
        lens = rec_len - (_MESSAGE_HEADER - 9)
        ends = offs + _MESSAGE_HEADER + lens
        if (rec_cid != cids).any() or (lens < 0).any() or ends.max() > length or (ends[:-1] > offs[1:]).any():
            return None
        return cids, times, offs, lens

    def _walk(self, buf: bytes | mmap.mmap, pos: int, stop: int, base: int) -> int:
        """Records in ``buf[pos:stop]`` one by one (``base`` maps buf offsets to buffer offsets); returns
        where the last complete record ends."""
        cids: list[int] = []
        times: list[int] = []
        starts: list[int] = []
        lens: list[int] = []
        while pos < stop:
            if pos + 9 > stop:
                self.result.problems.append(f"cut-off record at byte {pos + base}")
                break
            op = buf[pos]
            end = pos + 9 + _U64(buf, pos + 1)[0]
            if end > stop:
                self.result.problems.append(f"record 0x{op:02x} at byte {pos + base} overruns its chunk")
                break
            if op == _OP_MESSAGE and end >= pos + _MESSAGE_HEADER:
                cid, _seq, log_time = _MSG(buf, pos + 9)
                cids.append(cid)
                times.append(log_time)
                starts.append(pos + _MESSAGE_HEADER + base)
                lens.append(end - pos - _MESSAGE_HEADER)
            elif op in (_OP_SCHEMA, _OP_CHANNEL, _OP_METADATA):
                self._definition(op, buf, pos + 9, end)
            pos = end
        if cids:
            self._add(np.array(cids, np.int64), np.array(times, np.uint64).astype(np.int64),
                      np.array(starts, np.int64), np.array(lens, np.int64))
        return pos

    def _add(self, cids: np.ndarray, times: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> None:
        order = np.arange(self.order, self.order + len(cids), dtype=np.int64)
        self.order += len(cids)
        for cid in np.unique(cids).tolist():
            pick = cids == cid
            self.found[cid].append((times[pick], starts[pick], lens[pick], order[pick]))

    # -- end -------------------------------------------------------------------------------------
    def _stop(self, pos: int, why: str) -> None:
        self.result.stopped_at = pos
        self.result.problems.append(f"stopped at byte {pos} of {self.size}: {why}")

    def _has_footer(self) -> bool:
        return self.size >= 8 + 9 + 20 + 8 and self.raw[self.size - 8:self.size] == MCAP_MAGIC \
            and self.raw[self.size - 37] == _OP_FOOTER

    def _finish(self) -> None:
        if self.extra:
            self.result.buffer = np.concatenate([self.file, np.frombuffer(b"".join(self.extra), dtype=np.uint8)])
        for cid, parts in self.found.items():
            self.result.messages[cid] = ChannelMessages(*(np.concatenate([p[i] for p in parts]) for i in range(4)))


def _string(buf: bytes | mmap.mmap, pos: int) -> tuple[str, int]:
    n = _U32(buf, pos)[0]
    return bytes(buf[pos + 4:pos + 4 + n]).decode("utf-8"), pos + 4 + n


def _string_map(buf: bytes | mmap.mmap, pos: int) -> tuple[dict[str, str], int]:
    nbytes = _U32(buf, pos)[0]
    pos += 4
    stop = pos + nbytes
    found = {}
    while pos < stop:
        key, pos = _string(buf, pos)
        value, pos = _string(buf, pos)
        found[key] = value
    return found, stop


def _decompress(compression: str, blob: bytes, size: int) -> bytes:
    if compression == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14
        except ImportError:
            from backports import zstd  # rosbags' dependency
        data = zstd.decompress(blob)
    elif compression == "lz4":
        from lz4.frame import decompress

        data = decompress(blob)
    else:
        raise ValueError(f"unsupported chunk compression {compression!r}")
    if len(data) != size:
        raise ValueError(f"chunk decompressed to {len(data)} bytes, expected {size}")
    return data
