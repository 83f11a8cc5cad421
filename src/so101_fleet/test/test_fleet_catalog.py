"""``so101 fleet index``: one catalogue row per episode, from metadata only; health figures; bad bags."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from fleet_helpers import write_bag
from mcap.reader import make_reader
from small_fleet import SMALL_FLEET

from so101_fleet.catalog import CatalogError, build_catalog, read_catalog
from so101_testing import run_cli


def _mcap_counts(bag: Path) -> dict[str, int]:
    with next(bag.glob("*.mcap")).open("rb") as handle:
        summary = make_reader(handle).get_summary()
    channels = {cid: c.topic for cid, c in summary.channels.items()}
    return {channels[cid]: n for cid, n in summary.statistics.channel_message_counts.items()}


def test_index_cli_writes_one_row_per_episode_matching_the_bags(small_fleet: Path, tmp_path: Path) -> None:
    out = tmp_path / "catalog.parquet"
    assert run_cli("so101_fleet.cli", ["index", str(small_fleet), "--out", str(out)]) == 0
    rows = pq.read_table(out).to_pylist()  # plain pyarrow reads it
    assert len(rows) == SMALL_FLEET.arms * SMALL_FLEET.episodes
    assert {r["robot_id"] for r in rows} == {f"arm_{i:03d}" for i in range(SMALL_FLEET.arms)}
    for row in rows:
        bag = Path(row["path"])
        episode = yaml.safe_load((bag / "episode.yaml").read_text())
        assert row["episode_id"] == f"{episode['robot_id']}/{bag.name}"
        assert (row["task"], row["operator"]) == (episode["task"], episode["operator"])
        assert row["start_time"].value == episode["start_time_ns"]
        assert dict(row["message_counts"]) == _mcap_counts(bag)  # the MCAP's own statistics record
        assert row["duration_s"] == pytest.approx(SMALL_FLEET.duration_s - 1 / SMALL_FLEET.rate_hz)
        assert not row["truncated"] and row["indexed"] and row["faults"] == 0 and row["stream_gaps"] == 0
        assert row["duplicate_of"] is None and row["problems"] == []


def test_health_duplicates_truncation_gaps_and_faults(tmp_path: Path, small_fleet: Path) -> None:
    root = tmp_path / "bags"
    good = write_bag(root / "site_a" / "good", "arm_a")
    shutil.copytree(good, root / "site_b" / "good_copy")  # the same episode synced twice
    gap_times = [t / 50 for t in range(150) if not 50 <= t < 75]  # half a second missing
    write_bag(root / "site_a" / "gappy", "arm_b", times=gap_times)
    write_bag(root / "site_a" / "faulty", "arm_c", diagnostic_levels={"elbow_flex": 2, "gripper": 1})
    cut = write_bag(root / "site_a" / "cut", "arm_d")
    mcap = next(cut.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])  # recorder killed: half a file, no index
    (cut / "metadata.yaml").unlink()
    (root / "site_a" / "empty").mkdir()  # no bag: not a row

    rows = {Path(r["path"]).name: r for r in build_catalog([root]).to_pylist()}
    assert set(rows) == {"good", "good_copy", "gappy", "faulty", "cut"}
    assert rows["good_copy"]["duplicate_of"] == str(good) and rows["good"]["duplicate_of"] is None
    assert rows["gappy"]["stream_gaps"] == 1 and rows["gappy"]["max_gap_s"] == pytest.approx(0.52)
    assert (rows["faulty"]["faults"], rows["faulty"]["warnings"]) == (1, 1)
    assert rows["cut"]["truncated"] and not rows["cut"]["indexed"]
    assert any("unindexed" in p for p in rows["cut"]["problems"])
    assert 0 < dict(rows["cut"]["message_counts"])["/joint_states"] < 150  # what the complete chunks hold
    assert not any(rows[n]["truncated"] for n in ("good", "gappy", "faulty"))


def test_fsspec_url_indexes_like_a_local_path(small_fleet: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    arm = next(p for p in sorted(small_fleet.iterdir()) if p.is_dir())
    bag = sorted(b for b in arm.iterdir() if (b / "metadata.yaml").is_file())[0]
    for file in bag.iterdir():
        memory.pipe_file(f"/fleet_url/{arm.name}/{bag.name}/{file.name}", file.read_bytes())
    [remote] = build_catalog(["memory://fleet_url"]).to_pylist()
    [local] = [r for r in build_catalog([arm]).to_pylist() if r["name"] == bag.name]
    assert remote["path"] == f"memory://fleet_url/{arm.name}/{bag.name}"
    assert {k: v for k, v in remote.items() if k != "path"} == {k: v for k, v in local.items() if k != "path"}


def test_relative_roots_give_absolute_paths(small_fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(small_fleet.parent)  # Ray workers run elsewhere: the catalogue must not depend on the cwd
    rows = build_catalog([small_fleet.name]).to_pylist()
    assert rows and all(Path(r["path"]).is_absolute() and Path(r["path"]).is_dir() for r in rows)


def test_missing_root_and_foreign_parquet_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="nowhere is not a folder"):
        build_catalog([tmp_path / "nowhere"])
    other = tmp_path / "other.parquet"
    pq.write_table(__import__("pyarrow").table({"x": [1]}), other)
    with pytest.raises(CatalogError, match="not a fleet catalogue"):
        read_catalog(other)


def test_unknown_url_protocol_is_one_catalog_error_line() -> None:
    pytest.importorskip("fsspec")
    with pytest.raises(CatalogError, match=r"^bag root nosuchproto://bags: Protocol not known: nosuchproto") as err:
        build_catalog(["nosuchproto://bags"])
    assert "\n" not in str(err.value)


def test_summary_figures_match_the_record_walk_and_rosbags_levels(tmp_path: Path) -> None:
    from rosbags.typesys import Stores, get_typestore

    from so101_fleet.bag_figures import (
        DIAGNOSTIC_ARRAY,
        diagnostic_levels,
        figures_from_scan,
        figures_from_summary,
    )

    times = [t / 50 for t in range(150) if not 50 <= t < 75]
    bag = write_bag(tmp_path / "faulty", "arm_c", times=times, diagnostic_levels={"elbow_flex": 2, "gripper": 1})
    mcap = next(bag.glob("*.mcap"))
    summary = figures_from_summary(mcap, "/joint_states", "/diagnostics")
    assert summary is not None  # a closed bag has a summary: the index reads it, not the records
    walked = figures_from_scan(mcap, "/joint_states", "/diagnostics")
    assert (summary.topics, summary.counts, summary.first_ns, summary.last_ns) == \
        (walked.topics, walked.counts, walked.first_ns, walked.last_ns)
    assert summary.state_times.tolist() == walked.state_times.tolist() and len(summary.state_times) == len(times)
    assert summary.diagnostics == walked.diagnostics and len(summary.diagnostics) == 1
    decoded = get_typestore(Stores.ROS2_JAZZY).deserialize_cdr(summary.diagnostics[0], DIAGNOSTIC_ARRAY)
    assert diagnostic_levels(summary.diagnostics[0]) == [int(s.level) for s in getattr(decoded, "status")]  # noqa: B009
    assert sorted(diagnostic_levels(summary.diagnostics[0])) == [0, 0, 0, 0, 1, 2]
    with pytest.raises(ValueError, match="ends early|runs past"):
        diagnostic_levels(summary.diagnostics[0][:40])
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(mcap.read_bytes()[:-100])  # footer gone: no summary, the record walk takes over
    assert figures_from_summary(cut, "/joint_states", "/diagnostics") is None
