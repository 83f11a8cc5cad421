"""pytest plugin (registered as a ``pytest11`` entry point): every test process of the workspace,
whether run from the workspace root, per package or by ``colcon test``, talks DDS on loopback only,
on a private domain."""

from so101_ros.ros_env import apply_private_ros_env


def pytest_configure() -> None:
    apply_private_ros_env()
