"""``so101 train-gaponet --workers N`` (Ray Train, DDP over gloo) against the single-process training."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from so101_fleet.ray_runtime import loopback_env
from so101_fleet.train_cli import expand_datasets
from so101_gaponet.model_file import read_metadata
from so101_testing import run_cli


@pytest.fixture(scope="module")
def ray_local():
    for key, value in loopback_env().items():
        os.environ.setdefault(key, value)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", object_store_memory=100 * 1024**2,
             log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_fleet_root_expands_to_its_episode_datasets(processed_fleet: Path, tmp_path: Path) -> None:
    expanded = expand_datasets([processed_fleet, tmp_path])
    assert expanded[-1] == tmp_path and len(expanded) == len(list(processed_fleet.glob("episodes/*/*/dataset.json"))) + 1
    assert all((p / "dataset.json").is_file() for p in expanded[:-1])


@pytest.mark.slow
def test_two_ray_workers_reach_the_single_process_validation_loss(ray_local, processed_fleet: Path,
                                                                  tmp_path: Path) -> None:
    common = ["--dataset", str(processed_fleet), "--epochs", "4", "--hidden", "16", "--history", "3", "--seed", "3"]
    assert run_cli("so101_fleet.train_cli", [*common, "--out", str(tmp_path / "single.onnx")]) == 0
    assert run_cli("so101_fleet.train_cli", [*common, "--workers", "2", "--out", str(tmp_path / "ray.onnx")]) == 0
    single, distributed = read_metadata(tmp_path / "single.onnx"), read_metadata(tmp_path / "ray.onnx")
    assert "ray_train_workers" not in single.provenance
    assert distributed.provenance["ray_train_workers"] == 2 and distributed.provenance["ray_train_backend"] == "gloo"
    expected = single.provenance["final_validation_loss"]
    assert distributed.provenance["final_validation_loss"] == pytest.approx(expected, rel=0.05)
    assert distributed.provenance["final_validation_loss"] < distributed.provenance["initial_validation_loss"]
    assert distributed.normalisation == single.normalisation and distributed.delta_bounds == single.delta_bounds
