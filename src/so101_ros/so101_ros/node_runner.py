"""The one ``main()`` body of every workspace node: init, spin, clean shutdown, exit code.

Imported only by node modules (it imports rclpy when called), so the rest of this package stays
ROS-free.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from so101_common.waiting import wait_for

__all__ = ["run_node"]

# how long after an error in a callback the node waits for a shutdown already under way: rclpy's signal handler
# wakes the executor before it shuts the context down, and a subscription taken in between fails ("Unable to
# convert call argument '0' to Python object", seen at the end of a demo episode)
SHUTDOWN_GRACE_S = 0.5


def run_node(factory: Callable[[], Any], args: Sequence[str] | None, name: str,
             fatal: tuple[type[BaseException], ...] = (), spin: Callable[[Any], None] | None = None,
             on_exit: Callable[[Any], None] | None = None) -> int:
    """Build the node with ``factory`` and spin it until Ctrl-C, SIGTERM or ``rclpy`` shutdown.

    ``fatal`` errors (bad parameters, a model that does not fit, a port that does not open) are
    printed once as ``<name>: error: ...`` and give exit code 1; an error raised by a callback that the
    shutdown interrupted, or that came within :data:`SHUTDOWN_GRACE_S` before it, ends the node quietly
    (exit code 0); anything else propagates with its traceback. ``spin`` replaces ``rclpy.spin`` (e.g. spin until a job is done); ``on_exit`` runs
    before the node is destroyed (e.g. close a file it was writing).
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init(args=list(args) if args is not None else None)
    node = None
    try:
        node = factory()
        (spin or rclpy.spin)(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except fatal as err:
        print(f"{name}: error: {err}", file=sys.stderr, flush=True)
        return 1
    except Exception:
        # Ctrl-C shuts the context down under a callback that is running (a timer mid-publish: "publisher's
        # context is invalid"), or just after it failed: that is the node stopping as asked, not an error to
        # print a traceback for.
        if not wait_for(lambda: not rclpy.ok(), timeout=SHUTDOWN_GRACE_S):
            raise
    finally:
        if node is not None:
            if on_exit is not None:
                on_exit(node)
            node.destroy_node()
        rclpy.try_shutdown()
    return 0
