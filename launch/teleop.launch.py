"""Teleoperation: leader arm → safety filter → driver (+ optional episode recorder).

    ros2 launch launch/teleop.launch.py hardware:=real port:=/dev/ttyACM0 leader_port:=/dev/ttyACM1 record:=true
    ros2 launch launch/teleop.launch.py hardware:=virtual          # virtual follower and virtual leader
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, IncludeLaunchDescription
from launch.conditions import IfCondition, LaunchConfigurationEquals
from launch.substitutions import LaunchConfiguration, PythonExpression
from launch_ros.actions import Node

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "config")
VIRTUAL_LEADER_LINK = "/tmp/so101_leader"
VIRTUAL_LEADER_CALIBRATION = os.path.join(CONFIG, "calibration", "virtual_leader.json")


def generate_launch_description() -> LaunchDescription:
    leader_port = LaunchConfiguration("leader_port")
    leader_calibration = PythonExpression(["'", VIRTUAL_LEADER_CALIBRATION, "' if '", LaunchConfiguration("hardware"),
                                           "' == 'virtual' else ''"])
    return LaunchDescription([
        DeclareLaunchArgument("hardware", default_value="virtual", choices=["real", "virtual"]),
        DeclareLaunchArgument("leader_port", default_value=VIRTUAL_LEADER_LINK),
        DeclareLaunchArgument("leader_id", default_value="so101_leader", description="LeRobot leader calibration id"),
        DeclareLaunchArgument("record", default_value="false", description="start the episode recorder"),
        DeclareLaunchArgument("task", default_value="teleop", description="task name stored with each episode"),
        IncludeLaunchDescription(os.path.join(HERE, "robot.launch.py"),
                                 launch_arguments={"hardware": LaunchConfiguration("hardware")}.items()),
        ExecuteProcess(
            condition=LaunchConfigurationEquals("hardware", "virtual"),
            cmd=["so101", "virtual-bus", "--link", leader_port, "--role", "leader"],
            output="screen",
        ),
        Node(package="so101_driver", executable="leader", name="so101_leader", output="screen",
             parameters=[os.path.join(CONFIG, "leader.yaml"),
                         {"port": leader_port, "robot_id": LaunchConfiguration("leader_id"),
                          "calibration_file": leader_calibration}]),
        Node(package="so101_safety", executable="safety_filter", name="safety_filter", output="screen",
             parameters=[os.path.join(CONFIG, "safety.yaml")],
             remappings=[("input", "leader/joint_states"), ("output", "joint_command")]),
        Node(condition=IfCondition(LaunchConfiguration("record")),
             package="so101_recorder", executable="recorder", name="recorder", output="screen",
             parameters=[os.path.join(CONFIG, "recorder.yaml"), {"task": LaunchConfiguration("task")}]),
    ])
