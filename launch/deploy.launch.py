"""Policy deployment: policy (or a scripted motion) → GapONet compensator → safety filter → driver.

    ros2 launch so101_bringup deploy.launch.py hardware:=real policy_path:=outputs/train/act_so101/pretrained_model
    ros2 launch so101_bringup deploy.launch.py compensation:=false      # policy straight into the safety filter
    ros2 launch so101_bringup deploy.launch.py command_source:=motion motion:=wave   # virtual arm, scripted motion

The graph is defined once, as data, in ``so101_bringup.graphs.DEPLOY`` (the in-process composition is
derived from the same data); this file only turns it into a launch description.
"""

from so101_bringup.graphs import DEPLOY
from so101_bringup.launch_graph import launch_description


def generate_launch_description():
    return launch_description(DEPLOY)
