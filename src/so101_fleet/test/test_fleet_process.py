"""``so101 fleet process``: Ray tasks (one shared local session for the module), in process, resumable,
every kind of bad input reported per episode while the rest of the run completes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fleet_helpers import crash_worker_on_marked_episode, write_bag
from mcap.reader import make_reader

from so101_common.paired_dataset import PairedDataset
from so101_fleet.catalog import build_catalog, read_catalog, write_catalog
from so101_fleet.episode_job import ProcessConfig
from so101_fleet.process import RUN_REPORT, process_fleet, tasks_from_catalog
from so101_fleet.ray_runtime import loopback_env
from so101_fleet.simulate import FleetConfig, simulate_fleet
from so101_testing import run_cli


@pytest.fixture(scope="module")
def ray_local():
    for key, value in loopback_env().items():
        os.environ.setdefault(key, value)
    saved = os.environ.get("PYTHONPATH")
    # the workers import this test folder's helpers (the crashing episode function) like the driver does
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), saved]))
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", object_store_memory=100 * 1024**2,
             log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
    if saved is None:
        os.environ.pop("PYTHONPATH")
    else:
        os.environ["PYTHONPATH"] = saved


def _summaries(root: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in root.glob("episodes/*/*/summary.json")}


def test_ray_run_matches_in_process_run_and_rerun_skips_done(ray_local, fleet_catalog: Path, processed_fleet: Path,
                                                            tmp_path: Path) -> None:
    tasks = tasks_from_catalog(read_catalog(fleet_catalog))[:4]
    out = tmp_path / "ray_out"
    report = process_fleet(tasks, out, ProcessConfig(), workers=2)
    assert (report.done, report.skipped, report.errors) == (4, 0, [])
    assert report.mode == "ray (local)" and report.worker_processes >= 1
    ray_summaries, local_summaries = _summaries(out), _summaries(processed_fleet)
    assert len(ray_summaries) == 4
    for name, summary in ray_summaries.items():  # the same code on the same data: the same numbers
        assert summary["overall"] == local_summaries[name]["overall"]
        assert summary["episode_id"] == f"{summary['robot_id']}/{name}"
    # each episode is a normal paired dataset (so101 pair's format) that so101_sim2real reads back
    first = next(out.glob("episodes/*/*/dataset.json")).parent
    dataset = PairedDataset.load(first)
    assert len(dataset) == 1 and np.isfinite(dataset.episodes[0].sim_position).all()
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("episodes/*/*/summary.json")}
    again = process_fleet(tasks, out, ProcessConfig(), workers=2)
    assert (again.done, again.skipped, again.errors) == (0, 4, [])
    assert stamps == {p: p.stat().st_mtime_ns for p in out.glob("episodes/*/*/summary.json")}
    assert json.loads((out / RUN_REPORT).read_text())["skipped"] == 4


def test_bad_inputs_are_reported_per_episode_and_the_rest_completes(ray_local, tmp_path: Path) -> None:
    root = tmp_path / "bags"
    t = np.arange(0, 3.0, 0.02)
    write_bag(root / "good", "arm_a")
    shutil.copytree(root / "good", root / "copy" / "good")  # a duplicate
    write_bag(root / "no_commands", "arm_a", commands=False)
    write_bag(root / "unknown_joints", "arm_a", names=("j1", "j2", "j3", "j4", "j5", "j6"))
    back = t.copy()
    back[80:] -= 0.5  # the arm's clock was set back by half a second mid-episode
    write_bag(root / "clock_back", "arm_b", header_times=back)
    ahead = t.copy()
    ahead[80:] += 5.0  # the stamps leap five seconds while the bag's receive times run on
    write_bag(root / "clock_ahead", "arm_b", header_times=ahead)
    hole = np.concatenate([t[:80], t[80:] + 2.0])  # a 2 s hole in the stream: both times jump
    write_bag(root / "stream_gap", "arm_b", times=hole)
    cut = write_bag(root / "truncated", "arm_c", times=np.arange(0, 6.0, 0.02))
    mcap = next(cut.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[: int(mcap.stat().st_size * 0.7)])
    (cut / "metadata.yaml").unlink()
    garbage = root / "garbage"
    garbage.mkdir()
    (garbage / "garbage.mcap").write_bytes(b"not an mcap file at all")
    write_bag(root / "killed", "arm_d")

    catalog = write_catalog(build_catalog([root]), tmp_path / "catalog.parquet")
    tasks = tasks_from_catalog(read_catalog(catalog))
    report = process_fleet(tasks, tmp_path / "out", ProcessConfig(), workers=2,
                           episode_fn=crash_worker_on_marked_episode)
    kinds = {e["episode_id"].split("/")[-1]: e["kind"] for e in report.errors}
    assert kinds == {"good": "duplicate", "no_commands": "no_commands", "unknown_joints": "unknown_joints",
                     "clock_back": "clock_jump", "clock_ahead": "clock_jump", "garbage": "unreadable",
                     "killed": "worker_died"}
    assert report.done == 3  # good, stream_gap, truncated (recovered from its complete chunks)
    assert [w["episode_id"] for w in report.warnings] == ["arm_c/truncated"]
    saved = json.loads((tmp_path / "out" / RUN_REPORT).read_text())
    assert saved["error_counts"]["clock_jump"] == 2 and saved["done"] == 3
    messages = {e["episode_id"].split("/")[-1]: e["message"] for e in report.errors}
    assert "j1" in messages["unknown_joints"] and "/joint_command" in messages["no_commands"]
    assert "duplicate of" in messages["good"]


def test_simulate_on_ray_writes_the_same_bags_as_in_process(ray_local, tmp_path: Path) -> None:
    config = FleetConfig(arms=2, episodes=1, duration_s=1.0, seed=5)
    local = simulate_fleet(tmp_path / "local", config)
    distributed = simulate_fleet(tmp_path / "ray", config, workers=2)
    assert [b.relative_to(tmp_path / "ray") for b in distributed] == [b.relative_to(tmp_path / "local") for b in local]
    def payloads(bag: Path) -> list[bytes]:
        with next(bag.glob("*.mcap")).open("rb") as handle:
            return [m.data for _s, _c, m in make_reader(handle).iter_messages()]

    for a, b in zip(local, distributed, strict=True):  # (the metadata differs: it names its own root)
        assert payloads(a) == payloads(b)


def test_in_process_cli_run(fleet_catalog: Path, tmp_path: Path, capsys) -> None:
    table = read_catalog(fleet_catalog).slice(0, 2)
    small = write_catalog(table, tmp_path / "two.parquet")
    assert run_cli("so101_fleet.cli", ["process", str(small), "--sim", "mujoco", "--out", str(tmp_path / "ds"), "--workers", "1"]) == 0
    assert "in-process: 2 episodes processed" in capsys.readouterr().out
    assert len(_summaries(tmp_path / "ds")) == 2
