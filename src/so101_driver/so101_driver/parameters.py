"""Parameters of the driver and leader nodes: the one place for their defaults, descriptions and ranges.

``config/driver.yaml`` and ``config/leader.yaml`` set deployment values over these; the nodes declare
every field with a ``ParameterDescriptor`` (``so101_description.node_params``).
"""

from __future__ import annotations

from dataclasses import dataclass

from so101_common.parameters import parameter
from so101_description.joints import JOINT_NAMES

__all__ = ["ArmParameters", "FollowerParameters", "LEADER_DEFAULTS"]


@dataclass(frozen=True)
class ArmParameters:
    """What every SO-101 arm node (follower and leader) reads at start-up."""

    port: str = parameter("/dev/ttyACM0", "serial port of the arm's bus adapter (see `so101 scan`)")
    baudrate: int = parameter(1_000_000, "bus baud rate (STS3215 factory rate: 1000000)", low=9600, high=1_000_000)
    robot_id: str = parameter("so101_follower", "LeRobot calibration id: <calibration dir>/robots/so_follower/<id>.json "
                              "(teleoperators/so_leader/ for the leader)")
    calibration_file: str = parameter("", "explicit LeRobot calibration JSON; overrides robot_id when set")
    rate_hz: float = parameter(100.0, "control cycle rate (Hz): one sync read (+ one sync write) per cycle",
                               low=1.0, high=1000.0)
    diagnostics_rate_hz: float = parameter(1.0, "/diagnostics publishing rate (Hz)", low=0.01, high=100.0)
    joint_names: list[str] = parameter(list(JOINT_NAMES), "the SO-101 joints, any order: the order of joint_states")
    timeout_ms: float = parameter(20.0, "reply deadline per bus transaction (ms), plus the reply's wire time",
                                  low=1.0, high=1000.0)
    retries: int = parameter(1, "extra tries per transaction before a servo counts as faulted", low=0, high=10)


@dataclass(frozen=True)
class FollowerParameters(ArmParameters):
    """The follower also writes goals."""

    configure_servos: bool = parameter(False, "write LeRobot's servo settings (P16/I0/D32, accelerations, gripper "
                                       "limits) at start")
    torque_on_start: bool = parameter(True, "enable torque at start, holding the arm where it is")


LEADER_DEFAULTS = {"port": "/dev/ttyACM1", "robot_id": "so101_leader"}
"""Where the leader's defaults differ from :class:`ArmParameters`."""
