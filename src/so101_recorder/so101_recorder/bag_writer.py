"""One episode = one rosbag2 bag (MCAP storage), written from raw serialized messages.

The recorder never decodes messages: it hands the CDR bytes it received, with topic, type and
receive time, to :class:`EpisodeWriter`, which writes them through ``rosbags.rosbag2.Writer``.

Crash safety. rosbags' MCAP storage keeps messages in an in-memory chunk until it reaches 1 MiB,
which at joint-state rates is minutes of data. :class:`EpisodeWriter` closes the pending chunk and
flushes the file at least every ``flush_period_s`` (default 0.5 s; also from :meth:`EpisodeWriter.tick`
when no message arrives), so a recorder killed with SIGKILL leaves a file whose complete chunks hold
everything up to the last flush; :func:`so101_recorder.recovery.recover_bag` turns it back into an
indexed bag with ``metadata.yaml``. Closing a chunk early is done by a storage plugin subclassing
rosbags' ``McapWriter`` (its ``close_chunk``), registered through ``Writer.STORAGE_PLUGINS``; the
rosbags version is pinned and :func:`_check_rosbags_internals` fails loudly if those internals move.

Bag layout: ``<root>/<name>/{<name>.mcap, metadata.yaml, episode.yaml}`` with
``name = <UTC timestamp>_<task>_<NNN>``, NNN counting the task's episodes under ``root``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from rosbags.interfaces import Connection
from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.rosbag2.storage_mcap import McapWriter

from so101_recorder.errors import RecorderError, io_error
from so101_recorder.metadata import CUSTOM_DATA_KEY, EpisodeMetadata, TopicStats, software_version
from so101_recorder.msgtypes import TypeLibrary

__all__ = ["EpisodeWriter", "ROSBAG2_VERSION", "episode_name", "next_episode_path", "sanitize_task"]

LOG = logging.getLogger(__name__)

ROSBAG2_VERSION = 9
"""rosbag2 metadata version written (Jazzy's; the newest rosbags 0.11 writes)."""

_NAME_RE = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)_(?P<task>.+)_(?P<index>\d{3,})$")


class _FlushingMcapStorage(McapWriter):
    """rosbags' MCAP storage with an explicit flush: close the pending chunk, push it to the OS."""

    def flush(self, fsync: bool = False) -> None:
        if self.chunk.msgs:  # a chunk with only schema/channel records waits for its first message
            self.close_chunk()
        self.bio.flush()
        if fsync:
            os.fsync(self.bio.fileno())


class _RosbagWriter(Writer):
    STORAGE_PLUGINS = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _FlushingMcapStorage}


def _check_rosbags_internals(storage: object) -> _FlushingMcapStorage:
    if not (isinstance(storage, _FlushingMcapStorage) and hasattr(storage, "chunk") and hasattr(storage, "bio")
            and hasattr(storage.chunk, "msgs") and callable(getattr(storage, "close_chunk", None))):
        raise RecorderError("the installed rosbags no longer has the MCAP writer internals the recorder's "
                            "time-bounded flush relies on (McapWriter.chunk/close_chunk/bio); use the pinned rosbags")
    return storage


def sanitize_task(task: str) -> str:
    """A task name usable in a directory name (letters, digits, ``-``, ``_``, ``.``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", task.strip()).strip("-.")
    return cleaned or "episode"


def episode_name(task: str, index: int, when_ns: int | None = None) -> str:
    when = _dt.datetime.fromtimestamp((time.time_ns() if when_ns is None else when_ns) / 1e9, tz=_dt.UTC)
    return f"{when:%Y%m%dT%H%M%SZ}_{sanitize_task(task)}_{index:03d}"


def next_episode_path(root: Path | str, task: str, when_ns: int | None = None) -> Path:
    """``root/<timestamp>_<task>_<NNN>`` with NNN one above the task's highest existing episode under root."""
    root = Path(root)
    task = sanitize_task(task)
    highest = 0
    try:
        for entry in root.iterdir():
            match = _NAME_RE.match(entry.name)
            if match and match["task"] == task:
                highest = max(highest, int(match["index"]))
    except FileNotFoundError:
        pass
    except OSError as err:
        raise io_error("list bag root", root, err) from err
    return root / episode_name(task, highest + 1, when_ns)


class EpisodeWriter:
    """Writes one episode bag from raw CDR messages. Not thread-safe (the recorder serialises calls).

    Topics are added on their first message; a topic's type may not change within an episode.
    All OS errors (permission, disk full, ...) come out as :class:`RecorderError` naming the path.
    """

    def __init__(self, path: Path | str, metadata: EpisodeMetadata, *, flush_period_s: float = 0.5,
                 fsync: bool = False, types: TypeLibrary | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if flush_period_s <= 0:
            raise RecorderError(f"flush_period_s must be positive, got {flush_period_s}")
        self.path = Path(path)
        self.metadata = metadata
        self.flush_period_s = flush_period_s
        self.fsync = fsync
        self.types = types if types is not None else TypeLibrary()
        self._clock = clock
        self._writer: _RosbagWriter | None = None
        self._storage: _FlushingMcapStorage | None = None
        self._connections: dict[str, Connection] = {}
        self._next_flush = 0.0
        self._unflushed = 0

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._writer is not None

    @property
    def mcap_path(self) -> Path:
        return self.path / f"{self.path.name}.mcap"

    def open(self) -> EpisodeWriter:
        if self._writer is not None:
            raise RecorderError(f"bag {self.path} is already open")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            writer = _RosbagWriter(self.path, version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP)
            writer.open()
        except OSError as err:
            raise io_error("create bag", self.path, err) from err
        except WriterError as err:
            raise RecorderError(f"cannot create bag {self.path}: {err}") from err
        self._writer = writer
        self._storage = _check_rosbags_internals(writer.storage)
        self.metadata.name = self.path.name
        self.metadata.status = "recording"
        self.metadata.start_time_ns = self.metadata.start_time_ns or time.time_ns()
        self.metadata.software = self.metadata.software or software_version()
        self.metadata.save(self.path)
        self._next_flush = self._clock() + self.flush_period_s
        LOG.debug("recording episode %s", self.path)
        return self

    def close(self, stop_time_ns: int | None = None) -> EpisodeMetadata:
        """Finish the bag (index, ``metadata.yaml``) and mark the episode complete. ``stop_time_ns``
        defaults to now; a simulated recording passes its own clock's end of the episode."""
        writer = self._require_open()
        self.metadata.stop_time_ns = time.time_ns() if stop_time_ns is None else stop_time_ns
        self.metadata.status = "complete"
        writer.set_custom_data(CUSTOM_DATA_KEY, self.metadata.to_yaml())
        try:
            writer.close()
        except OSError as err:
            self._failed(err)
            raise io_error("finish bag", self.mcap_path, err) from err
        finally:
            self._writer = self._storage = None
        self.metadata.save(self.path)
        LOG.debug("episode %s complete: %d messages", self.path.name, self.metadata.message_count)
        return self.metadata

    def abort(self, reason: str) -> EpisodeMetadata:
        """Stop without indexing (after an error): flushed chunks stay recoverable."""
        if self._storage is not None:
            try:
                self._storage.flush(self.fsync)
            except (OSError, ValueError) as err:
                LOG.debug("flush during abort failed: %s", err)
            try:
                self._storage.bio.close()
            except (OSError, ValueError) as err:
                LOG.debug("close during abort failed: %s", err)
        self._writer = self._storage = None
        self.metadata.stop_time_ns = time.time_ns()
        self.metadata.status = "failed"
        self.metadata.error = reason
        try:
            self.metadata.save(self.path)
        except RecorderError as err:
            LOG.error("%s", err)
        return self.metadata

    def __enter__(self) -> EpisodeWriter:
        return self.open() if not self.is_open else self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.is_open:
            if exc is None:
                self.close()
            else:
                self.abort(f"{type(exc).__name__}: {exc}")

    # -- writing ---------------------------------------------------------------------------------
    def write(self, topic: str, msgtype: str, data: bytes | memoryview, timestamp_ns: int) -> None:
        """Append one serialized message; flushes when the flush period has passed."""
        writer = self._require_open()
        connection = self._connections.get(topic)
        if connection is None:
            connection = self._add_topic(writer, topic, msgtype)
        elif connection.msgtype != msgtype:
            raise RecorderError(f"topic {topic} changed type from {connection.msgtype} to {msgtype} within episode "
                                f"{self.path.name}")
        try:
            writer.write(connection, timestamp_ns, data)
        except OSError as err:
            self._failed(err)
            raise io_error("write to bag", self.mcap_path, err) from err
        stats = self.metadata.topics[topic]
        stats.count += 1
        stats.bytes += len(data)
        if stats.first_ns is None:
            stats.first_ns = timestamp_ns
        stats.last_ns = timestamp_ns
        self._unflushed += 1
        self.tick()

    def tick(self) -> None:
        """Flush if the flush period has passed (call periodically when messages may stop arriving)."""
        if self._storage is not None and self._unflushed and self._clock() >= self._next_flush:
            self.flush()

    def flush(self) -> None:
        """Close the pending chunk and hand everything written so far to the OS (``fsync`` optional)."""
        storage = self._require_storage()
        try:
            storage.flush(self.fsync)
        except OSError as err:
            self._failed(err)
            raise io_error("write to bag", self.mcap_path, err) from err
        self._unflushed = 0
        self._next_flush = self._clock() + self.flush_period_s

    # -- internals -------------------------------------------------------------------------------
    def _add_topic(self, writer: _RosbagWriter, topic: str, msgtype: str) -> Connection:
        msgdef, rihs01 = self.types.definition(msgtype)
        try:
            connection = writer.add_connection(topic, msgtype, msgdef=msgdef, rihs01=rihs01)
        except OSError as err:
            self._failed(err)
            raise io_error("write to bag", self.mcap_path, err) from err
        self._connections[topic] = connection
        self.metadata.topics[topic] = TopicStats(type=msgtype)
        return connection

    def _failed(self, err: OSError) -> None:
        """After an OS error the bag cannot be finished normally: keep what reached the disk."""
        self.abort(str(io_error("write to bag", self.mcap_path, err)))

    def _require_open(self) -> _RosbagWriter:
        if self._writer is None:
            raise RecorderError(f"bag {self.path} is not open")
        return self._writer

    def _require_storage(self) -> _FlushingMcapStorage:
        if self._storage is None:
            raise RecorderError(f"bag {self.path} is not open")
        return self._storage
