"""The recorder's logic without ROS: episodes on demand, raw messages in, one bag per episode.

The node (and ``so101 record``) feeds every received message to :meth:`Recorder.write` and calls
:meth:`Recorder.tick` periodically (time-bounded flushes, ``max_episode_s``); services and the
toggle topic call :meth:`Recorder.start` / :meth:`Recorder.stop` / :meth:`Recorder.toggle`.
Thread-safe: one lock serialises everything (uncontended in a single-threaded executor).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from so101_common.diagnostics import Level
from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import FaultSpanTracker, ServoFault
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.errors import RecorderError
from so101_recorder.metadata import EpisodeMetadata, file_ref
from so101_recorder.msgtypes import TypeLibrary

__all__ = ["RecorderConfig", "RecorderStatus", "Recorder"]

LOG = logging.getLogger(__name__)


@dataclass
class RecorderConfig:
    root: Path = Path("bags")  # directory that receives one bag directory per episode
    robot_id: str = "so101"  # arm id (LeRobot calibration id), stored in every episode
    task: str = "episode"  # default task / motion name (also part of the bag name)
    calibration_file: str | None = None  # calibration JSON the driver uses; hashed into the metadata
    gap_profile: str | None = None  # virtual robot gap profile (name or file); None for the real arm
    notes: str = ""  # default operator notes
    max_episode_s: float | None = None  # stop an episode automatically after this long (None: no limit)
    flush_period_s: float = 0.5  # longest time written data stays in memory (crash-safety bound)
    fsync: bool = False  # fsync at every flush (survives power loss, costs disk latency)

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser()
        if self.max_episode_s is not None and self.max_episode_s <= 0:
            self.max_episode_s = None
        if self.flush_period_s <= 0:
            raise RecorderError(f"flush_period_s must be positive, got {self.flush_period_s}")
        if not self.robot_id:
            raise RecorderError("robot_id must not be empty")

    LIVE = ("task", "notes", "robot_id", "calibration_file", "gap_profile", "max_episode_s")
    """Fields that may change while the recorder runs (they apply from the next episode)."""

    def update(self, values: dict[str, object]) -> None:
        """Change :attr:`LIVE` fields (all or none); '' / 0 mean unset for the optional ones."""
        fixed = [name for name in values if name not in self.LIVE]
        if fixed:
            raise RecorderError(f"{', '.join(fixed)}: read at start-up only")
        changed: dict[str, Any] = {name: (value or None) if name in ("calibration_file", "gap_profile", "max_episode_s") else value
                   for name, value in values.items()}
        for name in ("task", "robot_id"):
            if name in changed and not str(changed[name]).strip():
                raise RecorderError(f"{name} must not be empty")
        candidate = replace(self, **changed)  # validated by __post_init__
        for name in changed:
            setattr(self, name, getattr(candidate, name))


@dataclass
class RecorderStatus:
    recording: bool
    episode: str | None  # current (or last) episode name
    bag: Path | None
    episodes: int  # episodes completed in this session
    elapsed_s: float  # of the current episode
    messages: int  # written in the current (or last) episode
    bytes: int
    topics: dict[str, int] = field(default_factory=dict)  # messages per topic in the current episode
    ignored: int = 0  # messages received while not recording
    errors: int = 0
    last_error: str | None = None


    def summary(self) -> str:
        state = f"recording {self.episode} ({self.elapsed_s:.0f} s)" if self.recording else "idle"
        return state + (f"; last error: {self.last_error}" if self.last_error else "")

    def level(self, refused: bool) -> Level:
        """ERROR when an error ended the episode; WARN when a topic is refused (``refused``) or errors were counted."""
        if self.last_error and not self.recording:
            return Level.ERROR
        return Level.WARN if refused or self.errors else Level.OK

    def key_values(self, subscribed: Iterable[str] = (), refused: Mapping[str, str] | None = None) -> dict[str, str]:
        """Flat strings for a ``diagnostic_msgs/KeyValue`` list, with the topics subscribed and those refused (why)."""
        values = {"recording": self.recording, "episode": self.episode or "", "bag": self.bag or "",
                  "episodes": self.episodes, "elapsed_s": f"{self.elapsed_s:.1f}", "messages": self.messages,
                  "bytes": self.bytes, "ignored": self.ignored, "errors": self.errors,
                  **{f"count {topic}": n for topic, n in self.topics.items()},
                  "subscribed": ",".join(sorted(subscribed)),
                  **{f"refused {topic}": why for topic, why in (refused or {}).items()}}
        return {key: str(value) for key, value in values.items()}


class Recorder:
    """Episode recording session (see the module doc)."""

    def __init__(self, config: RecorderConfig, *, types: TypeLibrary | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.types = types if types is not None else TypeLibrary()
        self._clock = clock
        self._lock = threading.RLock()
        self._writer: EpisodeWriter | None = None
        self._last: EpisodeMetadata | None = None
        self._last_bag: Path | None = None
        self._started = 0.0
        self._episodes = 0
        self._ignored = 0
        self._errors = 0
        self._last_error: str | None = None
        self._bad_topics: dict[str, str] = {}
        self._faults = FaultSpanTracker()

    @property
    def recording(self) -> bool:
        return self._writer is not None

    def check_type(self, msgtype: str) -> None:
        """Raise :class:`RecorderError` now if ``msgtype``'s definition cannot be found (before subscribing)."""
        self.types.definition(msgtype)

    def start(self, task: str | None = None, notes: str | None = None) -> Path:
        """Begin a new episode bag; returns its path. Raises if already recording or on any I/O error."""
        with self._lock:
            if self._writer is not None:
                raise RecorderError(f"already recording episode {self._writer.path.name}")
            task = task or self.config.task  # kept as given in the metadata; sanitised in the bag name
            try:
                metadata = EpisodeMetadata(
                    name="", robot_id=self.config.robot_id, task=task,
                    calibration=file_ref(self.config.calibration_file, must_exist=True),
                    gap_profile=file_ref(self.config.gap_profile, must_exist=False),
                    notes=self.config.notes if notes is None else notes, start_time_ns=time.time_ns())
                writer = EpisodeWriter(next_episode_path(self.config.root, task), metadata,
                                       flush_period_s=self.config.flush_period_s, fsync=self.config.fsync,
                                       types=self.types, clock=self._clock).open()
            except RecorderError as err:
                self._error(str(err))
                raise
            self._writer = writer
            self._last_bag = writer.path
            self._started = self._clock()
            self._bad_topics.clear()
            self._faults = FaultSpanTracker()
            return writer.path

    def stop(self) -> EpisodeMetadata | None:
        """Close the current episode (None if not recording)."""
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is None:
                return None
            try:
                self._last = writer.close()
            except RecorderError as err:
                self._last = writer.metadata
                self._error(str(err))
                raise
            self._episodes += 1
            return self._last

    def toggle(self) -> bool:
        """Start if idle, stop if recording; returns whether it is recording afterwards."""
        with self._lock:
            if self._writer is None:
                self.start()
            else:
                self.stop()
            return self._writer is not None

    def write(self, topic: str, msgtype: str, data: bytes | memoryview, timestamp_ns: int) -> bool:
        """Record one raw message if an episode is open; returns whether it was written.

        A write error (disk full, ...) ends the episode (its flushed data stays recoverable) and is
        raised; a topic whose type cannot be stored is reported once and then ignored for the episode.
        """
        with self._lock:
            writer = self._writer
            if writer is None:
                self._ignored += 1
                return False
            if topic in self._bad_topics:
                return False
            try:
                writer.write(topic, msgtype, data, timestamp_ns)
            except RecorderError as err:
                if writer.is_open:  # the topic, not the bag, is the problem
                    self._bad_topics[topic] = str(err)
                else:
                    self._writer = None
                    self._last = writer.metadata
                self._error(str(err))
                raise
            return True

    def observe_faults(self, stamp: float, faults: list[ServoFault]) -> None:
        """One ``/diagnostics`` report's servo faults (``stamp``: its header stamp, s): spans go into the
        episode's metadata; ``episode.yaml`` is rewritten at once when one opens, so a crash that the fault
        causes cannot lose it."""
        with self._lock:
            writer = self._writer
            if writer is None:
                return
            opened = self._faults.observe(stamp, faults)
            writer.metadata.faults = self._faults.spans()
            if opened:
                try:
                    writer.metadata.save(writer.path)
                except RecorderError as err:
                    self._error(str(err))
                    raise

    def current_faults(self) -> list[FaultSpan]:
        """The fault spans of the open episode so far (empty when idle)."""
        with self._lock:
            return self._faults.spans() if self._writer is not None else []

    def tick(self) -> EpisodeMetadata | None:
        """Periodic work: flush when due; stop at ``max_episode_s`` (returns the finished episode then)."""
        with self._lock:
            writer = self._writer
            if writer is None:
                return None
            limit = self.config.max_episode_s
            if limit is not None and self._clock() - self._started >= limit:
                LOG.info("episode %s reached max_episode_s=%.1f", writer.path.name, limit)
                return self.stop()
            try:
                writer.tick()
            except RecorderError as err:
                self._writer = None
                self._last = writer.metadata
                self._error(str(err))
                raise
            return None

    def status(self) -> RecorderStatus:
        with self._lock:
            writer = self._writer
            metadata = writer.metadata if writer is not None else self._last
            topics = {name: stats.count for name, stats in metadata.topics.items()} if metadata else {}
            return RecorderStatus(
                recording=writer is not None,
                episode=metadata.name if metadata else None,
                bag=writer.path if writer is not None else self._last_bag,
                episodes=self._episodes,
                elapsed_s=self._clock() - self._started if writer is not None else 0.0,
                messages=sum(topics.values()),
                bytes=sum(s.bytes for s in metadata.topics.values()) if metadata else 0,
                topics=topics, ignored=self._ignored, errors=self._errors, last_error=self._last_error)

    def close(self) -> None:
        """Stop a running episode (on shutdown)."""
        if self._writer is not None:
            self.stop()

    def _error(self, message: str) -> None:
        self._errors += 1
        self._last_error = message  # the caller reports it (node log, CLI message): the core stays quiet
