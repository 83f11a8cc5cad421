"""A two-node Ray cluster started the way a user starts one: ``ray start --head`` and a second
``ray start --address`` on this machine, then ``so101 fleet process --ray-address``.

Everything lives in a temporary folder (Ray's temp dir, and HOME); the cluster has its own auth token.
The nodes use 127.0.0.2 and 127.0.0.3 (loopback addresses): Ray 2.60's ``ray start`` cannot join a
second node at 127.0.0.1 (with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` it refuses to, otherwise it
rewrites 127.0.0.1 to the machine's network address), and at any other address its servers listen
on every interface for the length of the test (the loopback-only two-node check is
``test_fleet_cluster.py``). Teardown stops exactly the two ``ray start --block`` processes this test
started and their process groups (every process of a node), also when the test fails. It does not run
``ray stop``, which would stop every Ray process on the machine, other users' included.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from so101_fleet.catalog import read_catalog, write_catalog
from so101_testing import wait_for

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a ``ray start --block`` and every process of its node (its process group)."""
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGTERM)  # --block stops the node's processes on SIGTERM
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    if _group_alive(process.pid):
        os.killpg(process.pid, signal.SIGKILL)  # what did not stop in time (gcs_server, monitor)
    process.wait(timeout=10)
    assert wait_for(lambda: not _group_alive(process.pid), timeout=10), f"ray start {process.pid}'s processes outlived it"


@pytest.fixture
def ray_start_cluster() -> Iterator[tuple[str, dict[str, str], list[subprocess.Popen[bytes]]]]:
    # short: Ray's unix socket paths under its temp dir must stay below 108 bytes
    with tempfile.TemporaryDirectory(prefix="so101_ray_", dir="/tmp") as tmp:
        yield from _cluster(Path(tmp))


def _cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], list[subprocess.Popen[bytes]]]]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # nothing from earlier sessions
    # token authentication on, with this cluster's own token: its servers listen beyond loopback
    env |= {"HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
            "RAY_worker_niceness": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    port = _free_port(HEAD_IP)
    address = f"{HEAD_IP}:{port}"
    common = ["--block", "--num-cpus", "1", "--object-store-memory", str(100 * 1024**2), "--disable-usage-stats"]
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        with (tmp_path / "head.log").open("wb") as log:
            nodes.append(subprocess.Popen([RAY, "start", "--head", "--port", str(port), "--node-ip-address", HEAD_IP,
                                           "--include-dashboard=false", "--temp-dir", str(tmp_path / "ray"), *common],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        assert wait_for(lambda: _accepts(HEAD_IP, port) or nodes[0].poll() is not None, timeout=90, interval=0.2)
        assert nodes[0].poll() is None, (tmp_path / "head.log").read_text()[-2000:]
        worker_log = tmp_path / "worker.log"
        with worker_log.open("wb") as log:
            nodes.append(subprocess.Popen([RAY, "start", "--address", address, "--node-ip-address", WORKER_IP, *common],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        # ray start prints this once its node has registered with the head
        assert wait_for(lambda: "block forever" in worker_log.read_text() or nodes[1].poll() is not None,
                        timeout=90, interval=0.2)
        assert nodes[1].poll() is None, worker_log.read_text()[-2000:]
        yield address, env, nodes
    finally:
        for node in reversed(nodes):
            _stop(node)


@pytest.mark.slow
def test_process_on_a_ray_start_cluster(ray_start_cluster, fleet_catalog: Path, tmp_path: Path) -> None:
    address, env, nodes = ray_start_cluster
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
    assert all(node.poll() is None for node in nodes)  # both nodes still up: the run did not take them down
