"""Teleoperation: leader arm → safety filter → driver (+ optional episode recorder).

    ros2 launch so101_bringup teleop.launch.py hardware:=real port:=/dev/ttyACM0 leader_port:=/dev/ttyACM1 record:=true
    ros2 launch so101_bringup teleop.launch.py hardware:=virtual          # virtual follower and virtual leader

The graph is defined once, as data, in ``so101_bringup.graphs.TELEOP`` (the in-process composition is
derived from the same data); this file only turns it into a launch description.
"""

from so101_bringup.graphs import TELEOP
from so101_bringup.launch_graph import launch_description


def generate_launch_description():
    return launch_description(TELEOP)
