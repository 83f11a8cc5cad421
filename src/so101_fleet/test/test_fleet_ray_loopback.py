"""``so101 fleet process --workers N`` without a cluster address: the local Ray runtime listens on loopback only
(issue 19 §6; main: GCS, raylet, driver and workers on ``*``, the runtime-env agent on the LAN address).

Each check runs in a child process of its own, as the command does: whether Ray keeps to loopback is
decided when ``ray`` is first imported, and this test process may have imported it already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# The command's runtime (ray_session(None, cpus=N), what `fleet process --workers N` opens), one task per worker
# run, then every listening TCP socket of this process and of everything it started (GCS, raylet, agents,
# workers), by process name.
CHILD = textwrap.dedent("""
    import json, os, sys
    import psutil
    from so101_fleet.ray_runtime import ray_session

    def worker_pid():
        return os.getpid()

    with ray_session(None, cpus=2) as ray:
        pids = ray.get([ray.remote(worker_pid).remote() for _ in range(4)])
        listening = {}
        for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
            try:
                sockets = process.net_connections(kind="inet")
                name = process.name()
            except psutil.NoSuchProcess:
                continue
            for s in sockets:
                if s.status == psutil.CONN_LISTEN:
                    listening.setdefault(name, []).append(s.laddr.ip)
    print(json.dumps({"listening": listening, "workers": len(set(pids))}))
""")


def _run(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"} | (env or {})
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env,
                          check=False)


def test_a_local_runtime_listens_on_loopback_only() -> None:
    result = _run(CHILD)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    listening: dict[str, list[str]] = report["listening"]
    names = " ".join(listening)
    assert "gcs_server" in names and "raylet" in names and "RuntimeEnvAgent" in names, listening
    assert report["workers"] >= 1 and any(name.startswith("ray::") and name != "ray::RuntimeEnvAgent" for name in listening)
    outside = {name: ips for name, ips in listening.items() if any(ip not in ("127.0.0.1", "::ffff:127.0.0.1") for ip in ips)}
    assert not outside, f"listening beyond loopback: {outside}"


def test_a_runtime_that_would_leave_loopback_is_refused() -> None:
    # ray imported with its cluster switch on (the user's environment, or a module that imported ray first)
    result = _run("import ray\n" + CHILD, env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
    assert result.returncode != 0
    assert "RayNotOnLoopback: the local Ray runtime came up on" in result.stderr
    assert "not on 127.0.0.1" in result.stderr
