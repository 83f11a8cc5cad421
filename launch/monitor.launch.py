"""Live monitoring in RViz: the measured arm and, as a ghost, the commanded arm.

Run beside robot/teleop/deploy (on the robot or on a laptop on the same ROS domain):
    ros2 launch so101_bringup monitor.launch.py

The graph is defined once, as data, in ``so101_bringup.graphs.MONITOR`` (the in-process composition is
derived from the same data); this file only turns it into a launch description.
"""

from so101_bringup.graphs import MONITOR
from so101_bringup.launch_graph import launch_description


def generate_launch_description():
    return launch_description(MONITOR)
