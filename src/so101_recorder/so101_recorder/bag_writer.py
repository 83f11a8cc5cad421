"""One episode = one rosbag2 bag (MCAP storage), written from raw serialized messages.

The recorder never decodes messages: it hands the CDR bytes it received, with topic, type and
receive time, to :class:`EpisodeWriter`, which writes them with the ``mcap`` library's public
``Writer`` (profile ``ros2``: ``ros2msg`` schemas, ``cdr`` channels with their offered QoS, the
``rosbag2`` metadata record) and, on close, rosbag2's ``metadata.yaml``. rosbags and ``ros2 bag``
read the result like any rosbag2 MCAP bag.

Crash safety. MCAP keeps messages in an in-memory chunk until it reaches ``chunk_size`` (1 MiB),
which at joint-state rates is minutes of data. :class:`EpisodeWriter` calls the writer's public
``flush()`` (finish the chunk in progress, write it and its message indexes, flush the stream) at
least every ``flush_period_s`` (default 0.5 s; also from :meth:`EpisodeWriter.tick` when no message
arrives), so a recorder killed with SIGKILL leaves a file whose complete chunks hold everything up
to the last flush; :func:`so101_recorder.recovery.recover_bag` turns it back into an indexed bag with
``metadata.yaml``.

Bag layout: ``<root>/<name>/{<name>.mcap, metadata.yaml, episode.yaml}`` with
``name = <UTC timestamp>_<task>_<NNN>``, NNN counting the task's episodes under ``root``.

Staged bags (``staged=True``: the offline writers, e.g. ``so101 replay``, whose output can be made again).
The bag is written under a temporary name (:func:`so101_common.atomic_output.temporary_name`) and renamed
to its name by :meth:`EpisodeWriter.close`; an error, Ctrl-C or a full disk removes it, so no partial bag
is left at the name. A live recording is not staged: what reached the disk before a crash is the
recording, kept and recoverable. A bag whose :meth:`EpisodeWriter.open` fails (nothing recorded yet, e.g.
a full disk) is removed either way.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, cast

import yaml
from mcap.writer import CompressionType, Writer

from so101_common.atomic_output import discard, publish_folder, temporary_name
from so101_recorder.errors import RecorderError, io_error
from so101_recorder.metadata import CUSTOM_DATA_KEY, EpisodeMetadata, TopicStats, software_version
from so101_recorder.msgtypes import TypeLibrary

__all__ = ["EpisodeWriter", "ROSBAG2_VERSION", "ROS_DISTRO", "episode_name", "next_episode_path", "sanitize_task"]

LOG = logging.getLogger(__name__)

ROSBAG2_VERSION: Literal[9] = 9
"""rosbag2 metadata version written (Jazzy's)."""
ROS_DISTRO = "jazzy"
CHUNK_SIZE = 1 << 20  # bytes: a chunk also ends at every time-bounded flush
NO_QOS = "[]"  # offered QoS profiles of a channel, rosbag2 v9 YAML (the recorder does not learn the publishers' QoS)

_NAME_RE = re.compile(r"^(?P<stamp>\d{8}T\d{6}Z)_(?P<task>.+)_(?P<index>\d{3,})$")


class _Output:
    """The bag file as the MCAP writer sees it: a stream whose underlying file can be fsync'ed."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file

    def write(self, data: bytes | memoryview) -> int:
        return self.file.write(data)

    def tell(self) -> int:
        return self.file.tell()

    def flush(self) -> None:
        self.file.flush()

    def fsync(self) -> None:
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


@dataclass
class _Topic:
    channel_id: int
    msgtype: str
    rihs01: str


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
                 clock: Callable[[], float] = time.monotonic, staged: bool = False) -> None:
        if flush_period_s <= 0:
            raise RecorderError(f"flush_period_s must be positive, got {flush_period_s}")
        self.path = Path(path)
        self.staged = staged  # written under a temporary name, renamed to path on close (module doc)
        self._folder = temporary_name(self.path) if staged else self.path  # where the files are written
        self.metadata = metadata
        self.flush_period_s = flush_period_s
        self.fsync = fsync
        self.types = types if types is not None else TypeLibrary()
        self._clock = clock
        self._writer: Writer | None = None
        self._output: _Output | None = None
        self._topics: dict[str, _Topic] = {}
        self._schemas: dict[str, int] = {}
        self._next_flush = 0.0
        self._unflushed = 0

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._writer is not None

    @property
    def mcap_path(self) -> Path:
        """The bag file (under the temporary name while a staged bag is written)."""
        return self._folder / f"{self.path.name}.mcap"

    def open(self) -> EpisodeWriter:
        if self._writer is not None:
            raise RecorderError(f"bag {self.path} is already open")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.staged:
                if self.path.exists():
                    raise FileExistsError(self.path)
                discard(self._folder)
            self._folder.mkdir()
        except FileExistsError as err:
            raise RecorderError(f"cannot create bag {self.path}: it exists already") from err
        except OSError as err:
            raise io_error("create bag", self.path, err) from err
        try:
            output = _Output(self.mcap_path.open("xb"))
            writer = Writer(cast("IO[bytes]", output), chunk_size=CHUNK_SIZE, compression=CompressionType.NONE)
            self._output = output
            self._writer = writer
            self._write_guarded(lambda: writer.start(profile="ros2", library=_library_name()))
            self.metadata.name = self.path.name
            self.metadata.status = "recording"
            self.metadata.start_time_ns = self.metadata.start_time_ns or time.time_ns()
            self.metadata.software = self.metadata.software or software_version()
            self.metadata.save(self._folder)
        except BaseException as err:  # nothing is recorded yet: leave no empty bag behind (a full disk, Ctrl-C)
            self._close_quietly()
            discard(self._folder)
            if isinstance(err, OSError):
                raise io_error("create bag", self.path, err) from err
            raise
        self._next_flush = self._clock() + self.flush_period_s
        LOG.debug("recording episode %s", self.path)
        return self

    def close(self, stop_time_ns: int | None = None) -> EpisodeMetadata:
        """Finish the bag (summary and index, ``metadata.yaml``) and mark the episode complete. ``stop_time_ns``
        defaults to now; a simulated recording passes its own clock's end of the episode."""
        writer, output = self._require_open(), self._output
        assert output is not None
        self.metadata.stop_time_ns = time.time_ns() if stop_time_ns is None else stop_time_ns
        self.metadata.status = "complete"
        info = self._bagfile_information()
        self._write_guarded(lambda: writer.add_metadata("rosbag2", {
            "serialized_metadata": yaml.safe_dump(info, sort_keys=False), "ROS_DISTRIBUTION": ROS_DISTRO}))
        self._write_guarded(writer.finish)
        try:
            output.flush()
            if self.fsync:
                output.fsync()
            output.close()
            _write_atomically(self._folder / "metadata.yaml",
                              yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False))
        except OSError as err:
            self._failed(err)
            raise io_error("finish bag", self.mcap_path, err) from err
        finally:
            self._writer = self._output = None
        try:
            self.metadata.save(self._folder)
            if self.staged:
                publish_folder(self._folder, self.path)
        except BaseException:
            if self.staged:
                discard(self._folder)
            raise
        self._folder = self.path
        LOG.debug("episode %s complete: %d messages", self.path.name, self.metadata.message_count)
        return self.metadata

    def abort(self, reason: str) -> EpisodeMetadata:
        """Stop without indexing (after an error): flushed chunks stay recoverable; a staged bag is removed."""
        if self.staged:
            self._close_quietly()
            discard(self._folder)
            self.metadata.status = "failed"
            self.metadata.error = reason
            return self.metadata
        writer, output = self._writer, self._output
        self._writer = self._output = None
        if writer is not None and output is not None:
            try:
                writer.flush()
                if self.fsync:
                    output.fsync()
            except (OSError, ValueError) as err:
                LOG.debug("flush during abort failed: %s", err)
            try:
                output.close()
            except (OSError, ValueError) as err:
                LOG.debug("close during abort failed: %s", err)
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
        known = self._topics.get(topic)
        if known is None:
            known = self._add_topic(writer, topic, msgtype)
        elif known.msgtype != msgtype:
            raise RecorderError(f"topic {topic} changed type from {known.msgtype} to {msgtype} within episode "
                                f"{self.path.name}")
        channel_id = known.channel_id
        self._write_guarded(lambda: writer.add_message(channel_id, log_time=timestamp_ns, data=bytes(data),
                                                       publish_time=timestamp_ns))
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
        if self._writer is not None and self._unflushed and self._clock() >= self._next_flush:
            self.flush()

    def flush(self) -> None:
        """Close the pending chunk and hand everything written so far to the OS (``fsync`` optional)."""
        writer, output = self._require_open(), self._output
        assert output is not None
        self._write_guarded(writer.flush)
        if self.fsync:
            self._write_guarded(output.fsync)
        self._unflushed = 0
        self._next_flush = self._clock() + self.flush_period_s

    # -- internals -------------------------------------------------------------------------------
    def _add_topic(self, writer: Writer, topic: str, msgtype: str) -> _Topic:
        msgdef, rihs01 = self.types.definition(msgtype)

        def register() -> int:
            if msgtype not in self._schemas:
                encoding = "ros2idl" if msgdef.startswith("=" * 80 + "\nIDL: ") else "ros2msg"
                self._schemas[msgtype] = writer.register_schema(msgtype, encoding, msgdef.encode("utf-8"))
            return writer.register_channel(topic, "cdr", self._schemas[msgtype], {"offered_qos_profiles": NO_QOS})

        known = _Topic(self._write_guarded(register), msgtype, rihs01)
        self._topics[topic] = known
        self.metadata.topics[topic] = TopicStats(type=msgtype)
        return known

    def _write_guarded(self, action: Callable[[], Any]) -> Any:
        """Run a write to the bag file; an OS error ends the episode (kept recoverable) and is raised as
        a :class:`RecorderError` naming the file and the cause."""
        try:
            return action()
        except OSError as err:
            self._failed(err)
            raise io_error("write to bag", self.mcap_path, err) from err

    def _bagfile_information(self) -> dict[str, Any]:
        """rosbag2's ``rosbag2_bagfile_information`` (metadata version 9) for what was written."""
        stats = self.metadata.topics
        firsts = [s.first_ns for s in stats.values() if s.first_ns is not None]
        lasts = [s.last_ns for s in stats.values() if s.last_ns is not None]
        start = min(firsts) if firsts else 0
        duration = max(0, (max(lasts) if lasts else 0) - start)
        count = self.metadata.message_count
        return {
            "version": ROSBAG2_VERSION,
            "storage_identifier": "mcap",
            "relative_file_paths": [self.mcap_path.name],
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": count,
            "topics_with_message_count": [
                {"topic_metadata": {"name": topic, "type": known.msgtype, "serialization_format": "cdr",
                                    "offered_qos_profiles": [], "type_description_hash": known.rihs01},
                 "message_count": stats[topic].count}
                for topic, known in self._topics.items()
            ],
            "compression_format": "",
            "compression_mode": "",
            "files": [{"path": self.mcap_path.name, "starting_time": {"nanoseconds_since_epoch": start},
                       "duration": {"nanoseconds": duration}, "message_count": count}],
            "custom_data": {CUSTOM_DATA_KEY: self.metadata.to_yaml()},
            "ros_distro": ROS_DISTRO,
        }

    def _close_quietly(self) -> None:
        output = self._output
        self._writer = self._output = None
        if output is not None:
            try:
                output.close()
            except (OSError, ValueError) as err:
                LOG.debug("close failed: %s", err)

    def _failed(self, err: OSError) -> None:
        """After an OS error the bag cannot be finished normally: keep what reached the disk."""
        self.abort(str(io_error("write to bag", self.mcap_path, err)))

    def _require_open(self) -> Writer:
        if self._writer is None:
            raise RecorderError(f"bag {self.path} is not open")
        return self._writer


def _library_name() -> str:
    version = software_version().get("version")
    return f"so101_recorder {version}" if version else "so101_recorder"


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
