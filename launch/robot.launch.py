"""SO-101 driver + robot_state_publisher (+ RViz); the real arm or the virtual SO-101.

    ros2 launch so101_bringup robot.launch.py hardware:=real port:=/dev/ttyACM0 robot_id:=my_follower
    ros2 launch so101_bringup robot.launch.py hardware:=virtual rviz:=true

The graph is defined once, as data, in ``so101_bringup.graphs.ROBOT`` (the in-process composition is
derived from the same data); this file only turns it into a launch description.
"""

from so101_bringup.graphs import ROBOT
from so101_bringup.launch_graph import launch_description


def generate_launch_description():
    return launch_description(ROBOT)
