"""Loopback-only DDS settings with a private domain id.

Loopback is Jazzy's ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` alone: ``ROS_LOCALHOST_ONLY`` is
deprecated and removed from the environment (rcl prints a deprecation warning per node while it is set).
"""

from __future__ import annotations

import os

__all__ = ["private_domain_id", "private_ros_env", "apply_private_ros_env"]

_DEPRECATED = ("ROS_LOCALHOST_ONLY",)
_LOOPBACK_SETTINGS = {
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
    "PYTHONUNBUFFERED": "1",
}


def private_domain_id(seed: int | None = None) -> int:
    """A domain id in 1..100 derived from ``seed`` (default: this process id).

    Domains above 101 collide with ephemeral ports on Linux; 0 is everyone's default.
    An explicit ``ROS_DOMAIN_ID`` already set by a parent run is kept so child processes share it.
    """
    if seed is None and "SO101_TEST_DOMAIN_ID" in os.environ:
        return int(os.environ["SO101_TEST_DOMAIN_ID"])
    return 1 + ((os.getpid() if seed is None else seed) % 100)


def private_ros_env(domain_id: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) with loopback-only DDS on a private domain."""
    env = dict(os.environ if base is None else base)
    env.update(_LOOPBACK_SETTINGS)
    for key in _DEPRECATED:
        env.pop(key, None)
    domain = private_domain_id() if domain_id is None else domain_id
    env["ROS_DOMAIN_ID"] = str(domain)
    env["SO101_TEST_DOMAIN_ID"] = str(domain)
    return env


def apply_private_ros_env(domain_id: int | None = None) -> int:
    """Put loopback-only DDS settings into this process's environment; returns the domain id."""
    env = private_ros_env(domain_id)
    for key in (*_LOOPBACK_SETTINGS, "ROS_DOMAIN_ID", "SO101_TEST_DOMAIN_ID"):
        os.environ[key] = env[key]
    for key in _DEPRECATED:
        os.environ.pop(key, None)
    return int(env["ROS_DOMAIN_ID"])
