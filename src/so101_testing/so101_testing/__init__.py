"""Test helpers shared by the workspace: private loopback DDS environment, node processes, waits.

Every test, demo and benchmark that touches DDS goes through :func:`private_ros_env` (for child
processes) or :func:`apply_private_ros_env` (for this process, before ``rclpy.init``), so no
traffic leaves loopback and concurrent runs on one machine do not hear each other.
"""

from so101_common.waiting import wait_for
from so101_ros.ros_env import apply_private_ros_env, private_domain_id, private_ros_env
from so101_testing.cli import run_cli
from so101_testing.process import NodeProcess
from so101_testing.signals import best_lagged_correlation

__all__ = ["run_cli", "apply_private_ros_env", "private_ros_env", "private_domain_id", "NodeProcess", "wait_for",
           "best_lagged_correlation"]
