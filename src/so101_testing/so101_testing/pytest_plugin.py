"""pytest plugin (registered as a ``pytest11`` entry point) for every test process of the workspace,
whether run from the workspace root, per package or by ``colcon test``:

- DDS on loopback only, on a private domain;
- the heap that importing the tests built is frozen once they are collected. Many tests serve the
  virtual bus from a thread of their own process; a full collection of that heap (~120 ms with LeRobot
  loaded, ~20 ms with rclpy) holds the interpreter lock past the servos' reply deadline (the SDK's
  50 ms, the driver's shorter ones), which a real servo, a chip of its own, never misses. Frozen, a
  collection only looks at what the tests allocate afterwards.
"""

import gc

import pytest

from so101_ros.ros_env import apply_private_ros_env


def pytest_configure() -> None:
    apply_private_ros_env()


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
