"""Connecting to Ray: an existing cluster (``--ray-address``) or a local runtime, kept on loopback.

Ray's usage statistics are switched off and the dashboard is not started. A local runtime listens on
127.0.0.1 only (GCS, raylet, the driver's and every worker's gRPC server, the runtime-env agent; the
dashboard and metrics agents listen nowhere). How, in Ray 2.60's own source: every server binds to the
node's IP address, and ``ray.init(_node_ip_address="127.0.0.1")`` keeps 127.0.0.1 only when
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (``ray._private.services.resolve_ip_for_localhost``: otherwise
it rewrites a loopback address to the machine's network address, and the C++ servers then listen on
every interface). Ray reads that variable once, when ``ray`` is imported
(``ray_constants.ENABLE_RAY_CLUSTER``), so :func:`ray_session` sets it before its first ``import ray``,
and refuses to go on when the runtime still came up elsewhere (``ray`` imported earlier by someone else).
A session this module started is shut down when the ``with`` block ends; one that was already running (a
test's shared session, or the caller's) is left as it was.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["ray_session", "LOOPBACK", "loopback_env", "worker_env", "RayNotOnLoopback"]

LOOPBACK = "127.0.0.1"
_LOG = logging.getLogger(__name__)


class RayNotOnLoopback(RuntimeError):
    """A local Ray runtime came up on another address than loopback (and was shut down)."""


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
    if not address:  # before the first `import ray`: Ray reads them then (module doc)
        for key, value in (loopback_env() | worker_env()).items():
            os.environ.setdefault(key, value)
    import ray

    started = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        else:
            ray.init(num_cpus=cpus or os.cpu_count() or 1, include_dashboard=False, _node_ip_address=LOOPBACK,
                     object_store_memory=object_store_mb * 1024 * 1024, log_to_driver=False, configure_logging=False)
            node_ip = ray.util.get_node_ip_address()
            if node_ip != LOOPBACK:
                ray.shutdown()
                raise RayNotOnLoopback(
                    f"the local Ray runtime came up on {node_ip}, where its servers listen on every interface, not on "
                    f"{LOOPBACK}: ray was imported before RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set (set it in the "
                    "environment, or pass --ray-address to use a cluster)")
        started = True
        _LOG.info("ray: %s", ray.cluster_resources())
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()
