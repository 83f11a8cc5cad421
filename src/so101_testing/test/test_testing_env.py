"""The private DDS environment every test, demo and benchmark runs in."""

from __future__ import annotations

import os

from so101_testing import private_domain_id, private_ros_env


def test_this_test_process_was_put_on_loopback_by_the_plugin() -> None:
    assert os.environ["ROS_LOCALHOST_ONLY"] == "1"
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 1 <= int(os.environ["ROS_DOMAIN_ID"]) <= 100


def test_child_environment_keeps_the_domain_and_loopback() -> None:
    env = private_ros_env(base={"PATH": "/bin", "ROS_LOCALHOST_ONLY": "0"}, domain_id=42)
    assert env["ROS_LOCALHOST_ONLY"] == "1" and env["ROS_DOMAIN_ID"] == "42" and env["PATH"] == "/bin"
    assert all(1 <= private_domain_id(seed) <= 100 for seed in range(0, 1000, 7))
