"""Nodes run as child processes, as a launch file runs them (no rclpy): what ``ComposedGraph(own_process=...)`` uses.

Each node runs as ``python -m <module> --ros-args ...`` with its overrides in a parameter file after its
own; its output goes to this process's console line by line (a launch's ``output='screen'``) and its last
lines are kept for the one-line error of a child that exits (:mod:`so101_bringup.children`). A child gets
Ctrl-C when this process dies, however it dies (Linux: :mod:`so101_bringup.child_node`), so no driver outlives
a killed demo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from so101_bringup.children import raise_for_child

__all__ = ["NodeProcesses"]

class NodeProcesses:
    """Child-process nodes by key: :meth:`start` each, :meth:`raise_for_exited` while they should run, :meth:`stop`."""

    def __init__(self) -> None:
        self.children: dict[str, subprocess.Popen[str]] = {}
        self._output: dict[str, deque[str]] = {}  # by key: each child's last lines (its error, if it fails)
        self._readers: dict[str, threading.Thread] = {}
        self._files: tempfile.TemporaryDirectory[str] | None = None  # the overrides' parameter files

    def start(self, key: str, module: str, ros_args: Sequence[str], overrides: Mapping[str, Any], nice: int = 0) -> None:
        """``python -m module`` with ``ros_args`` (from ``--ros-args``) and then ``overrides`` as a parameter file;
        ``nice``: its scheduling priority lowered by that much."""
        if self._files is None:
            self._files = tempfile.TemporaryDirectory(prefix="so101_nodes_")
        args = list(ros_args)
        if overrides:
            path = Path(self._files.name) / f"{key}.yaml"
            path.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(overrides)}}))
            args += ["--params-file", str(path)]
        niceness = ["--nice", str(nice)] if nice else []
        command = [sys.executable, "-m", "so101_bringup.child_node", *niceness, str(os.getpid()), module, *args]
        child = subprocess.Popen(command, text=True, bufsize=1, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.children[key] = child
        lines: deque[str] = deque(maxlen=100)
        self._output[key] = lines
        reader = threading.Thread(target=_forward, args=(child, lines), name=f"so101-{key}-output", daemon=True)
        self._readers[key] = reader
        reader.start()

    @property
    def running(self) -> bool:
        return any(child.poll() is None for child in self.children.values())

    def exited(self) -> bool:
        """Whether a child has exited."""
        return any(child.poll() is not None for child in self.children.values())

    def raise_for_exited(self) -> None:
        """:class:`~so101_bringup.children.ChildProcessFailed` with its message if a child has exited."""
        for key, child in self.children.items():
            if child.poll() is not None:
                self._readers[key].join(timeout=5.0)  # its last lines: the output ends when it has exited
                # killed by a signal, its last line is whatever it was logging: the exit status says more
                output = "".join(self._output[key]) if child.returncode > 0 else ""
                raise_for_child(f"node {key}", child.returncode, output)

    def stop(self) -> None:
        """Ctrl-C to each child, as a launch stops its nodes (they shut down cleanly); killed after 10 s."""
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
        for child in self.children.values():
            try:
                child.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for reader in self._readers.values():
            reader.join(timeout=5.0)
        self.children.clear()
        self._output.clear()
        self._readers.clear()
        if self._files is not None:
            self._files.cleanup()
            self._files = None


def _forward(child: subprocess.Popen[str], lines: deque[str]) -> None:
    """Copy a child node's output to this console line by line, keeping its last lines."""
    assert child.stdout is not None
    for line in child.stdout:
        lines.append(line)
        sys.stderr.write(line)
