"""The private DDS environment every test, demo and benchmark runs in."""

from __future__ import annotations

import os
import subprocess
import sys

from so101_testing import private_domain_id, private_ros_env


def test_this_test_process_was_put_on_loopback_by_the_plugin() -> None:
    assert "ROS_LOCALHOST_ONLY" not in os.environ  # deprecated in Jazzy: rcl warns while it is set
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 1 <= int(os.environ["ROS_DOMAIN_ID"]) <= 100


def test_child_environment_keeps_the_domain_and_loopback() -> None:
    env = private_ros_env(base={"PATH": "/bin", "ROS_LOCALHOST_ONLY": "1"}, domain_id=42)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert "ROS_LOCALHOST_ONLY" not in env
    assert env["ROS_DOMAIN_ID"] == "42" and env["PATH"] == "/bin"
    assert all(1 <= private_domain_id(seed) <= 100 for seed in range(0, 1000, 7))


def test_a_node_in_the_private_environment_prints_no_deprecation_warning() -> None:
    env = private_ros_env(base={**os.environ, "ROS_LOCALHOST_ONLY": "1"})  # as a user's shell might set it
    script = "import rclpy; rclpy.init(); n = rclpy.create_node('quiet'); n.get_logger().info('up'); rclpy.shutdown()"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "up" in output, output
    assert "deprecated" not in output and "localhost_only" not in output, output
