"""``python -m so101_bringup.child_node [--nice N] <parent pid> <module> [args...]``: a node's module run as
``__main__`` in a child process that gets Ctrl-C when its parent dies, however the parent dies (Linux).
``--nice N`` lowers its scheduling priority by N first (a monitor that must never take the CPU from the
control chain: the driver and the arm's bus answer first when the machine is busy).

A driver left running by a killed parent would hold the arm's port and its last command, torque on; a Ctrl-C
from the terminal reaches both anyway, a ``kill -9`` of the parent only this way. The child arms the signal
itself, in its own main thread after exec (``preexec_fn`` runs between fork and exec, which Python documents
as unsafe in a process that already runs threads, as rclpy's and torch's do), then checks that the parent it
was started by is still its parent: one that died before the signal was armed is noticed too. Linux sends the
signal when the parent *thread* that started the child ends: start children from a thread that outlives them.
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

__all__ = ["stop_with_parent", "main"]

_PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def stop_with_parent(parent_pid: int) -> None:
    """Ctrl-C (SIGINT) to this process when ``parent_pid``, its parent, dies; at once if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGINT)


def main() -> None:
    argv = sys.argv[1:]
    nice = 0
    if argv[:1] == ["--nice"] and len(argv) > 1:
        nice, argv = int(argv[1]), argv[2:]
    if len(argv) < 2:
        sys.exit("usage: python -m so101_bringup.child_node [--nice N] <parent pid> <module> [arguments]")
    parent, module, *args = argv
    try:
        stop_with_parent(int(parent))
        if nice:
            os.nice(nice)
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:
        # Ctrl-C before the node's own handling began (while it imported): stop as a program stopped by Ctrl-C
        # does, with SIGINT's exit status, and without a traceback on the parent's console
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    main()
