"""The fleet catalogue: one Parquet row per episode bag, from metadata only.

``build_catalog(roots)`` finds bag folders under each root (recursively; a local path, or any
fsspec URL when fsspec is installed) and reads, per bag, only what describes it: the episode
metadata (``episode.yaml``, else the ``so101.episode`` custom data of ``metadata.yaml``), and of each
MCAP file its summary section (:mod:`so101_fleet.bag_figures`: statistics, channels, the state
topic's message index entries), or, for a file without one (recorder killed), its record structure
through :func:`so101_recorder.mcap_scan.scan_mcap`. Neither decodes a message. From that come the
topics, the message counts, the stream gaps (log-time steps of the state topic above
:data:`GAP_FACTOR` × its median period) and truncation (no footer, no ``metadata.yaml`` index, or an
episode that did not end ``complete``). The only payload bytes read are the status levels of the
``/diagnostics`` arrays (a message a second), for the faults the arm reported. A bag that cannot be
read still gets a row, with the reason in ``problems``; an episode met twice (the same robot, name
and start time under another path) gets ``duplicate_of``.

Columns: :data:`CATALOG_SCHEMA`. Remote (fsspec) bags are copied one at a time into a temporary
file for the scan, so memory stays at one bag.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from so101_common import topics
from so101_fleet.bag_figures import BagFigures, diagnostic_levels, read_bag_figures
from so101_fleet.recorder_adapter import CUSTOM_DATA_KEY, EPISODE_FILE, BagReadError, SafeLoader

__all__ = ["CATALOG_SCHEMA", "GAP_FACTOR", "STATE_TOPIC", "DIAGNOSTICS_TOPIC", "BagLocation", "find_bags",
           "index_bag", "build_catalog", "write_catalog", "read_catalog", "CatalogError"]

STATE_TOPIC = topics.absolute(topics.JOINT_STATES)
DIAGNOSTICS_TOPIC = topics.DIAGNOSTICS
GAP_FACTOR = 3.0  # a step of the state stream above GAP_FACTOR × its median period is a gap
_MIN_GAP_S = 0.05

CATALOG_SCHEMA = pa.schema([
    pa.field("episode_id", pa.string(), nullable=False),  # <robot_id>/<episode name>: the pipeline's key
    pa.field("path", pa.string(), nullable=False),  # bag folder (local path or fsspec URL)
    pa.field("name", pa.string(), nullable=False),
    pa.field("robot_id", pa.string()),
    pa.field("task", pa.string()),
    pa.field("operator", pa.string()),
    pa.field("gap_profile", pa.string()),  # profile name or file the arm ran with (virtual arms)
    pa.field("gap_profile_sha256", pa.string()),
    pa.field("status", pa.string()),  # recorder status: complete, failed, recovered, recording
    pa.field("start_time", pa.timestamp("ns", tz="UTC")),
    pa.field("duration_s", pa.float64()),
    pa.field("topics", pa.map_(pa.string(), pa.string())),  # topic → type
    pa.field("message_counts", pa.map_(pa.string(), pa.int64())),  # topic → messages
    pa.field("messages", pa.int64()),
    pa.field("bytes", pa.int64()),  # size of the MCAP file(s)
    pa.field("truncated", pa.bool_()),
    pa.field("indexed", pa.bool_()),  # has rosbag2's metadata.yaml
    pa.field("faults", pa.int64()),  # /diagnostics statuses at ERROR or STALE
    pa.field("warnings", pa.int64()),  # /diagnostics statuses at WARN
    pa.field("stream_gaps", pa.int64()),  # steps of the state stream above GAP_FACTOR × its median period
    pa.field("max_gap_s", pa.float64()),
    pa.field("duplicate_of", pa.string()),  # path of the first copy of this episode, if it is a copy
    pa.field("problems", pa.list_(pa.string())),  # why something could not be read
])


class CatalogError(ValueError):
    """A catalogue that cannot be read or a root that does not exist."""


@dataclass(frozen=True)
class BagLocation:
    """A bag folder: its path (or URL) and, for fsspec storage, the filesystem object."""

    path: str
    fs: Any = None  # fsspec filesystem; None for a local path


def find_bags(roots: Sequence[str | os.PathLike[str]]) -> Iterator[BagLocation]:
    """Bag folders (a folder holding an ``.mcap`` file) under each root, recursively, sorted per root."""
    for root in roots:
        text = os.fspath(root)
        if "://" in text:
            yield from _find_remote(text)
            continue
        if not Path(text).is_dir():
            raise CatalogError(f"bag root {text} is not a folder")
        found = []
        for folder, _dirs, files in os.walk(os.path.abspath(text)):  # absolute: workers elsewhere read them
            if any(f.endswith(".mcap") for f in files):
                found.append(folder)
        yield from (BagLocation(f) for f in sorted(found))


def _find_remote(url: str) -> Iterator[BagLocation]:
    try:
        import fsspec
    except ImportError as err:
        raise CatalogError(f"{url}: reading URLs needs fsspec (pip install fsspec and its backend)") from err
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except ValueError as err:  # "Protocol not known: foo"
        raise CatalogError(f"bag root {url}: {err} (fsspec.available_protocols() lists the known ones)") from err
    except ImportError as err:  # a known protocol whose backend is not installed ("Install s3fs to access S3")
        raise CatalogError(f"bag root {url}: {err}") from err
    if not fs.isdir(root):
        raise CatalogError(f"bag root {url} is not a folder")
    protocol = url.split("://", 1)[0]
    folders = sorted({p.rsplit("/", 1)[0] for p in fs.find(root) if p.endswith(".mcap")})
    for folder in folders:
        yield BagLocation(f"{protocol}://{folder.lstrip('/')}" if protocol != "file" else folder, fs)


def build_catalog(roots: Sequence[str | os.PathLike[str]],
                  progress: Callable[[int], None] | None = None) -> pa.Table:
    """The catalogue of every bag under ``roots`` (see the module doc)."""
    rows: list[dict[str, Any]] = []
    first_seen: dict[tuple[str, str, int], str] = {}
    for location in find_bags(roots):
        row = index_bag(location)
        key = (row["robot_id"] or "", row["name"], row["start_time"] or 0)
        if key in first_seen and row["robot_id"]:
            row["duplicate_of"] = first_seen[key]
        else:
            first_seen.setdefault(key, row["path"])
        rows.append(row)
        if progress is not None:
            progress(len(rows))
    return pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA)


def index_bag(location: BagLocation) -> dict[str, Any]:
    """One catalogue row (see :data:`CATALOG_SCHEMA`); never raises for a bad bag."""
    if location.fs is None:
        return _index_local(Path(location.path), location.path)
    with tempfile.TemporaryDirectory(prefix="so101_fleet_") as tmp:
        local = Path(tmp) / location.path.rstrip("/").rsplit("/", 1)[-1]
        local.mkdir()
        root = location.path.split("://", 1)[-1]
        for remote in location.fs.ls(root, detail=False):
            name = remote.rsplit("/", 1)[-1]
            if name.endswith((".mcap", ".yaml")):
                location.fs.get_file(remote, str(local / name))
        return _index_local(local, location.path)


def _index_local(folder: Path, shown: str) -> dict[str, Any]:
    problems: list[str] = []
    episode, indexed = _episode_metadata(folder, problems)
    mcaps = sorted(folder.glob("*.mcap"))
    row: dict[str, Any] = {
        "path": shown, "name": str(episode.get("name") or folder.name), "robot_id": episode.get("robot_id"),
        "task": episode.get("task"), "operator": episode.get("operator"), "status": episode.get("status"),
        "start_time": episode.get("start_time_ns"), "indexed": indexed, "duplicate_of": None,
        "bytes": sum(p.stat().st_size for p in mcaps), "faults": 0, "warnings": 0, "stream_gaps": 0,
    }
    profile = episode.get("gap_profile") or {}
    row["gap_profile"] = profile.get("path") if isinstance(profile, dict) else None
    row["gap_profile_sha256"] = profile.get("sha256") if isinstance(profile, dict) else None
    row["episode_id"] = f"{row['robot_id'] or 'unknown'}/{row['name']}"
    files = []
    for mcap in mcaps:
        try:
            files.append(read_bag_figures(mcap, STATE_TOPIC, DIAGNOSTICS_TOPIC))
        except BagReadError as err:
            problems.append(str(err))
    truncated = not files or any(f.truncated for f in files) or not indexed
    if row["status"] not in (None, "complete"):
        truncated = True
        problems.append(f"episode status {row['status']}" + (f": {episode['error']}" if episode.get("error") else ""))
    for figures in files:
        problems.extend(figures.problems)
    row["truncated"] = truncated
    _stream_figures(files, row, problems)
    row["problems"] = problems
    return row


def _episode_metadata(folder: Path, problems: list[str]) -> tuple[dict[str, Any], bool]:
    """The episode metadata dict (episode.yaml, else metadata.yaml's custom data) and whether the bag is indexed."""
    episode: dict[str, Any] = {}
    indexed = (folder / "metadata.yaml").is_file()
    try:
        episode = yaml.load((folder / EPISODE_FILE).read_text(encoding="utf-8"), Loader=SafeLoader) or {}
    except FileNotFoundError:
        pass
    except (OSError, yaml.YAMLError) as err:
        problems.append(f"{EPISODE_FILE}: {err}")
    if not episode and indexed:
        try:
            info = yaml.load((folder / "metadata.yaml").read_text(encoding="utf-8"), Loader=SafeLoader)
            custom = (info.get("rosbag2_bagfile_information") or {}).get("custom_data") or {}
            if CUSTOM_DATA_KEY in custom:
                episode = yaml.load(custom[CUSTOM_DATA_KEY], Loader=SafeLoader) or {}
        except (OSError, yaml.YAMLError, AttributeError) as err:
            problems.append(f"metadata.yaml: {err}")
    if not isinstance(episode, dict):
        problems.append(f"{EPISODE_FILE}: not a mapping")
        episode = {}
    if not episode:
        problems.append("no episode metadata (episode.yaml / so101.episode custom data)")
    if not indexed:
        problems.append("no metadata.yaml: unindexed bag (recover it with so101 record --recover)")
    return episode, indexed


def _stream_figures(files: list[BagFigures], row: dict[str, Any], problems: list[str]) -> None:
    topics: dict[str, str] = {}
    counts: dict[str, int] = {}
    for figures in files:
        for topic, msgtype in figures.topics.items():
            topics.setdefault(topic, msgtype)
            counts[topic] = counts.get(topic, 0) + figures.counts.get(topic, 0)
        for payload in figures.diagnostics:
            try:
                levels = diagnostic_levels(payload)
            except ValueError as err:  # a malformed payload is one problem of this bag, not a crash of the index
                problems.append(f"{DIAGNOSTICS_TOPIC}: unreadable message: {err}")
                continue
            row["faults"] += sum(level >= 2 for level in levels)
            row["warnings"] += sum(level == 1 for level in levels)
    firsts = [f.first_ns for f in files if f.first_ns is not None]
    lasts = [f.last_ns for f in files if f.last_ns is not None]
    row["topics"] = topics
    row["message_counts"] = counts
    row["messages"] = sum(counts.values())
    if row["start_time"] is None and firsts:
        row["start_time"] = min(firsts)
    row["duration_s"] = (max(lasts) - min(firsts)) / 1e9 if firsts and lasts else None
    times = np.sort(np.concatenate([f.state_times for f in files])) if files else np.zeros(0, np.int64)
    row["max_gap_s"] = None
    if len(times) >= 3:
        steps = np.diff(times) / 1e9
        threshold = max(GAP_FACTOR * float(np.median(steps)), _MIN_GAP_S)
        row["stream_gaps"] = int(np.count_nonzero(steps > threshold))
        row["max_gap_s"] = float(steps.max())


def write_catalog(table: pa.Table, out: str | os.PathLike[str]) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)
    return out


def read_catalog(path: str | os.PathLike[str]) -> pa.Table:
    """A catalogue written by :func:`write_catalog` (its columns checked)."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise CatalogError(f"cannot read catalogue {path}: {err}") from err
    missing = [f.name for f in CATALOG_SCHEMA if f.name not in table.column_names]
    if missing:
        raise CatalogError(f"{path}: not a fleet catalogue (missing columns {missing})")
    return table
