"""A two-node Ray cluster on this machine, loopback only: ``so101 fleet process --ray-address`` runs the
fleet's episodes on both nodes.

The nodes are separate Ray processes (GCS + a raylet per node) started with Ray's own multi-node
test utility, :class:`ray.cluster_utils.Cluster`, at 127.0.0.1. The ``ray start`` command line cannot
do this on Ray 2.60: a second ``ray start --address`` refuses to join while
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (the switch that keeps Ray on loopback), and with it on it
rewrites 127.0.0.1 (in ``--address`` and ``--node-ip-address``) to the machine's network address,
where Ray's servers listen on every interface. ``test_fleet_ray_start.py`` runs the ``ray start``
way (on 127.0.0.2/.3); the docker compose profile uses ``ray start`` on its own network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from so101_fleet.catalog import read_catalog, write_catalog
from so101_fleet.ray_runtime import loopback_env


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, str], set[str]]]:
    env = dict(os.environ) | loopback_env()
    os.environ.update(loopback_env())
    from ray.cluster_utils import Cluster

    node: dict[str, Any] = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 100 * 1024**2}
    cluster = Cluster(initialize_head=True, head_node_args=node | {"include_dashboard": False})
    try:
        cluster.add_node(**node)
        pids = {str(p.process.pid) for n in cluster.list_all_nodes() for procs in n.all_processes.values()
                for p in procs}
        yield cluster.address, env, pids
    finally:
        cluster.shutdown()


def _listening(pids: set[str]) -> list[str]:
    """Local addresses of the listening TCP sockets of the given processes."""
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [line.split()[3] for line in lines if any(f"pid={pid}," in line for pid in pids)]


@pytest.mark.slow
def test_process_on_a_two_node_cluster(cluster, fleet_catalog: Path, tmp_path: Path) -> None:
    address, env, pids = cluster
    catalog = write_catalog(read_catalog(fleet_catalog).slice(0, 4), tmp_path / "four.parquet")
    out = tmp_path / "dataset"
    run = subprocess.run([sys.executable, "-m", "so101_testing.cli", "so101_fleet.cli", "process", str(catalog), "--sim", "mujoco",
                          "--out", str(out), "--ray-address", address], env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = json.loads((out / "run_report.json").read_text())
    assert (report["done"], report["errors"], report["mode"]) == (4, [], f"ray ({address})")
    assert report["worker_processes"] >= 2  # one CPU per node: both nodes ran episodes
    assert len(list(out.glob("episodes/*/*/summary.json"))) == 4
    addresses = _listening(pids)
    assert addresses, "found no listening socket of the cluster"
    assert all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for a in addresses), addresses
