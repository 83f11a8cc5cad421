"""Turn the bag of a killed recorder back into a complete rosbag2 bag.

A recorder that dies mid-episode leaves ``<name>.mcap`` without its summary and footer and no
``metadata.yaml``; standard tools (rosbags, ``ros2 bag``) refuse it. :func:`recover_bag` reads every
complete chunk (:func:`so101_recorder.mcap_scan.scan_mcap`), writes the same messages (same bytes,
timestamps, topics, types and definitions, in file order) into a new bag through rosbags, moves the
damaged file aside as ``<name>.mcap.truncated`` (or deletes it), and writes ``metadata.yaml`` and an
updated ``episode.yaml`` (status ``recovered``, with what recovery found).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.metadata import parse_qos

from so101_recorder.bag_reader import bag_files
from so101_recorder.bag_writer import ROSBAG2_VERSION
from so101_recorder.errors import RecorderError, io_error
from so101_recorder.mcap_scan import McapScan, scan_mcap
from so101_recorder.metadata import CUSTOM_DATA_KEY, EpisodeMetadata, TopicStats, load_episode
from so101_recorder.msgtypes import TypeLibrary

__all__ = ["RecoveryReport", "recover_bag", "needs_recovery"]

LOG = logging.getLogger(__name__)
DAMAGED_SUFFIX = ".truncated"


@dataclass
class RecoveryReport:
    bag: Path
    recovered: bool  # False when the bag was already complete
    messages: int = 0
    topics: dict[str, int] = field(default_factory=dict)
    file_size: int = 0  # bytes of the damaged file
    stopped_at: int | None = None  # where its readable data ended
    damaged_file: Path | None = None  # the original, kept aside
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if not self.recovered:
            return f"{self.bag}: complete, nothing to recover"
        kept = f"; damaged original kept as {self.damaged_file.name}" if self.damaged_file else ""
        return (f"{self.bag}: recovered {self.messages} messages on {len(self.topics)} topics "
                f"(readable data ended at byte {self.stopped_at} of {self.file_size}){kept}")


def needs_recovery(path: Path | str) -> bool:
    """True if the bag lacks ``metadata.yaml`` or its MCAP file lacks the summary/footer."""
    bag_dir, files, storage = bag_files(path)
    if storage != "mcap":
        return False
    return not (bag_dir / "metadata.yaml").is_file() or any(scan_mcap(f).truncated for f in files)


def recover_bag(path: Path | str, *, keep_damaged: bool = True) -> RecoveryReport:
    """Rewrite a truncated episode bag into a complete one (see the module doc); idempotent."""
    bag_dir, files, storage = bag_files(path)
    if storage != "mcap":
        raise RecorderError(f"cannot recover {bag_dir}: only MCAP bags can be recovered (storage {storage})")
    if len(files) != 1:
        raise RecorderError(f"cannot recover {bag_dir}: split bags ({len(files)} files) are not supported")
    mcap = files[0]
    scan = scan_mcap(mcap)
    if scan.complete and (bag_dir / "metadata.yaml").is_file():
        return RecoveryReport(bag_dir, recovered=False)
    report = RecoveryReport(bag_dir, recovered=True, file_size=mcap.stat().st_size, stopped_at=scan.stopped_at,
                            problems=list(scan.problems))
    episode = load_episode(bag_dir) or EpisodeMetadata(name=bag_dir.name, robot_id="unknown", task="unknown")
    work = bag_dir / ".recover"
    try:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir()
        staged = work / bag_dir.name
        _rewrite(scan, staged, episode, report)
        if keep_damaged:
            report.damaged_file = mcap.with_name(mcap.name + DAMAGED_SUFFIX)
            os.replace(mcap, report.damaged_file)
        else:
            mcap.unlink()
        os.replace(staged / f"{bag_dir.name}.mcap", bag_dir / f"{bag_dir.name}.mcap")
        os.replace(staged / "metadata.yaml", bag_dir / "metadata.yaml")
        shutil.rmtree(work)
    except OSError as err:
        raise io_error("recover bag", bag_dir, err) from err
    episode.save(bag_dir)
    LOG.info("%s", report.summary())
    return report


def _rewrite(scan: McapScan, target: Path, episode: EpisodeMetadata, report: RecoveryReport) -> None:
    types = TypeLibrary()
    writer = Writer(target, version=ROSBAG2_VERSION, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    connections = {}
    episode.topics = {}
    for cid, channel in sorted(scan.channels.items()):
        if cid not in scan.messages:
            continue
        schema = scan.schemas.get(channel.schema_id)
        if schema is None:
            report.problems.append(f"channel {cid} ({channel.topic}) has no schema: its messages are dropped")
            continue
        msgdef = schema.data.decode("utf-8")
        try:
            _, rihs01 = types.definition(schema.name)
        except RecorderError:
            types.register_definition(schema.name, msgdef)
            rihs01 = types.typestore.hash_rihs01(schema.name)
        try:
            qos = parse_qos(channel.metadata.get("offered_qos_profiles", ""))
        except Exception as err:  # rosbags raises its own ReaderError on bad YAML; QoS is informative only
            report.problems.append(f"{channel.topic}: unreadable offered QoS dropped ({err})")
            qos = []
        connections[cid] = writer.add_connection(channel.topic, schema.name, msgdef=msgdef, rihs01=rihs01,
                                                 serialization_format=channel.message_encoding,
                                                 offered_qos_profiles=qos)
        episode.topics.setdefault(channel.topic, TopicStats(type=schema.name))
    columns = [(cid, found) for cid, found in scan.messages.items() if cid in connections]
    if columns:
        cids = np.concatenate([np.full(len(found), cid) for cid, found in columns])
        fields = [np.concatenate([getattr(found, name) for _, found in columns])
                  for name in ("log_time", "starts", "lengths", "order")]
        index = np.argsort(fields[3], kind="stable")
        buffer = scan.buffer
        for cid, stamp, start, length in zip(cids[index].tolist(), *(f[index].tolist() for f in fields[:3]), strict=True):
            writer.write(connections[cid], stamp, buffer[start:start + length].tobytes())
            stats = episode.topics[connections[cid].topic]
            stats.count += 1
            stats.bytes += length
            stats.first_ns = stamp if stats.first_ns is None else min(stats.first_ns, stamp)
            stats.last_ns = stamp if stats.last_ns is None else max(stats.last_ns, stamp)
    report.messages = episode.message_count
    report.topics = {topic: stats.count for topic, stats in episode.topics.items()}
    episode.status = "recovered"  # an earlier error, if any, stays in episode.error
    if episode.stop_time_ns is None:
        last = [s.last_ns for s in episode.topics.values() if s.last_ns is not None]
        episode.stop_time_ns = max(last) if last else episode.start_time_ns
    episode.recovery = {
        "recovered_at": _dt.datetime.now(tz=_dt.UTC).isoformat(timespec="seconds"),
        "recovered_at_ns": time.time_ns(),
        "messages": report.messages,
        "damaged_file_bytes": report.file_size,
        "readable_bytes": report.stopped_at,
        "problems": report.problems[:20],
    }
    writer.set_custom_data(CUSTOM_DATA_KEY, episode.to_yaml())
    writer.close()
