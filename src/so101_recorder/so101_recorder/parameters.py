"""Parameters of the recorder node: the one place for their defaults, descriptions and ranges.

``config/recorder.yaml`` sets deployment values over these; the node declares every field with a
``ParameterDescriptor`` (``so101_ros.node_params``).
"""

from __future__ import annotations

from dataclasses import dataclass

from so101_common import topics
from so101_common.parameters import parameter

__all__ = ["DEFAULT_TOPICS", "RecorderParameters"]

DEFAULT_TOPICS = [topics.JOINT_STATES, topics.LEADER_STATES, topics.POLICY_COMMAND, topics.COMPENSATED_COMMAND,
                  topics.JOINT_COMMAND, topics.TWIN_STATES, topics.TWIN_GAP, topics.TWIN_GAP_RMSE, topics.DIAGNOSTICS]
"""Relative names resolve in the recorder's namespace (a whole graph under one namespace records its own
topics); ``/diagnostics`` is global by ROS convention. The gap twin's topics are recorded when it runs, so a
bag holds the arm and its sim twin side by side (already paired)."""


@dataclass(frozen=True)
class RecorderParameters:
    topics: list[str] = parameter(DEFAULT_TOPICS, "topics to record (relative names resolve in the node's namespace; "
                                  "topics that appear later are picked up by rediscovery)")
    bag_root: str = parameter("bags", "one directory per episode: <bag_root>/<UTC timestamp>_<task>_<NNN>/")
    robot_id: str = parameter("so101", "robot id stored in every episode's metadata")
    task: str = parameter("episode", "motion / task name (bag name and LeRobot task text)")
    calibration_file: str = parameter("", "calibration JSON the driver uses: path and SHA-256 go into the metadata")
    gap_profile: str = parameter("", "virtual robot gap profile (name or file) when recording the virtual arm")
    notes: str = parameter("", "operator notes stored in the metadata")
    max_episode_s: float = parameter(0.0, "stop an episode automatically after this long (s); 0 = no limit",
                                     low=0.0, high=86400.0)
    flush_period_s: float = parameter(0.5, "crash safety: at most this much data (s) is lost if the recorder is killed",
                                      low=0.01, high=60.0)
    fsync: bool = parameter(False, "also fsync at every flush (power-loss safety; costs disk latency)")
    discovery_period_s: float = parameter(1.0, "how often to look for topics that appeared (s)", low=0.05, high=60.0)
    diagnostics_period_s: float = parameter(1.0, "period of the recorder's /diagnostics status (s)", low=0.05, high=60.0)
    qos_depth: int = parameter(100, "subscription queue depth", low=1, high=100000)
    autostart: bool = parameter(False, "start an episode as soon as the node is up (else ~/start, ~/toggle)")
