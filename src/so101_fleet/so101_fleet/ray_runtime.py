"""Connecting to Ray: an existing cluster (``--ray-address``) or a local runtime, kept on loopback.

Ray's usage statistics are switched off and the dashboard is not started. A local runtime binds to
127.0.0.1 only: Ray's servers listen on loopback when the node address is 127.0.0.1, and
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is Ray's switch that makes it pick the loopback address
instead of the machine's network address. A session this module started is shut down when the ``with`` block ends; one that
was already running (a test's shared session, or the caller's) is left as it was.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ray_session", "LOOPBACK", "loopback_env", "worker_env"]

LOOPBACK = "127.0.0.1"
_LOG = logging.getLogger(__name__)


def worker_env() -> dict[str, str]:
    """Environment for a local runtime's raylet: workers at the driver's priority. Ray starts workers at
    niceness 15 by default, for nodes shared with latency-sensitive services; here the workers are the run's
    work, and at 15 every other process on the machine takes their CPU first (the in-process loop, at 0,
    would not suffer that)."""
    return {"RAY_worker_niceness": "0"}


def loopback_env() -> dict[str, str]:
    """Environment for Ray processes kept on this machine: loopback addresses, no usage statistics."""
    return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextmanager
def ray_session(address: str | None, cpus: int | None = None, object_store_mb: int = 256) -> Iterator[Any]:
    """``ray`` connected to ``address`` (``auto``, ``HOST:PORT``, ``ray://...``) or to a new local runtime
    with ``cpus`` CPUs (default: this machine's) when ``address`` is None."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        else:
            for key, value in (loopback_env() | worker_env()).items():
                os.environ.setdefault(key, value)
            ray.init(num_cpus=cpus or os.cpu_count() or 1, include_dashboard=False, _node_ip_address=LOOPBACK,
                     object_store_memory=object_store_mb * 1024 * 1024, log_to_driver=False, configure_logging=False)
        started = True
        _LOG.info("ray: %s", ray.cluster_resources())
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
