"""Whole-workspace pytest setup: every test process talks DDS on loopback, on a private domain."""

from so101_testing import apply_private_ros_env

apply_private_ros_env()
