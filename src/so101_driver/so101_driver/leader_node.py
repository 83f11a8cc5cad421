"""ROS 2 node of the SO-101 leader arm: reads it with torque off and publishes ``leader/joint_states``.

    ros2 run so101_driver leader --ros-args -p port:=/dev/ttyACM1 -p robot_id:=my_leader

The leader's calibration is LeRobot's teleoperator file (``teleoperators/so_leader/<robot_id>.json``,
or ``calibration_file``). Same parameters as the driver except the command side: no ``joint_command``,
no torque services, and torque is switched off at start so the arm moves freely by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from so101_common import topics
from so101_driver.driver_node import ArmNode
from so101_driver.errors import DriverError
from so101_driver.parameters import LEADER_DEFAULTS, ArmParameters
from so101_feetech.calibration import CalibrationError
from so101_ros.node_runner import run_node

__all__ = ["LeaderNode", "main"]


class LeaderNode(ArmNode):
    role = "leader"
    state_topic = topics.LEADER_STATES
    parameters = ArmParameters
    parameter_defaults = LEADER_DEFAULTS

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("so101_leader", write_goals=False, **kwargs)

    def start_core(self) -> None:
        self.core.start(torque_off=True)
        if self.core.bus_error:
            self.get_logger().error(f"waiting for {self.core.bus.port}: {self.core.bus_error}")
        else:
            self.get_logger().info("leader running (torque off)")


def main(args: Sequence[str] | None = None) -> int:
    return run_node(LeaderNode, args, "so101_leader", fatal=(DriverError, CalibrationError))


if __name__ == "__main__":
    sys.exit(main())
