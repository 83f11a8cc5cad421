"""Safety filter between command sources and the SO-101 driver.

The rclpy-free core is importable from here; the node lives in :mod:`so101_safety.safety_node`.
"""

from so101_safety.config import JointLimits, JointOverride, NodeOptions, SafetyConfig, load_config, load_parameters
from so101_safety.core import FilterStats, RejectReason, SafeCommand, SafetyFilter, Verdict
from so101_safety.errors import SafetyConfigError, SafetyError

__all__ = [
    "JointLimits", "JointOverride", "NodeOptions", "SafetyConfig", "load_config", "load_parameters",
    "FilterStats", "RejectReason", "SafeCommand", "SafetyFilter", "Verdict", "SafetyConfigError", "SafetyError",
]
