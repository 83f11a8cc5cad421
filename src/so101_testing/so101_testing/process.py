"""Run a node (or any Python module) in a child process with the private DDS environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from so101_ros.ros_env import private_ros_env

__all__ = ["NodeProcess"]


class NodeProcess:
    """``python -m MODULE ARGS`` as a child process, stopped with SIGINT (then SIGKILL) on exit.

    Output goes to a temporary log file so a chatty child never blocks on a full pipe;
    :meth:`output` reads it back for assertions and failure messages.
    """

    def __init__(self, module: str, args: Sequence[str] = (), env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.module = module
        self.args = list(args)
        self.env = private_ros_env() if env is None else env
        self.cwd = cwd
        self._log = tempfile.NamedTemporaryFile(prefix=f"{module.replace('.', '_')}_", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> NodeProcess:
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module, *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd,
        )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGINT) -> int | None:
        """Send ``sig`` and wait; kill if it does not exit in time. Returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def __enter__(self) -> NodeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
