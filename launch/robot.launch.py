"""SO-101 driver + robot_state_publisher (+ RViz); the real arm or the virtual SO-101.

    ros2 launch launch/robot.launch.py hardware:=real port:=/dev/ttyACM0 robot_id:=my_follower
    ros2 launch launch/robot.launch.py hardware:=virtual rviz:=true
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess
from launch.conditions import IfCondition, LaunchConfigurationEquals
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "config")
VIRTUAL_LINK = "/tmp/so101_follower"
VIRTUAL_CALIBRATION = os.path.join(CONFIG, "calibration", "virtual_follower.json")


def generate_launch_description() -> LaunchDescription:
    port = LaunchConfiguration("port")
    # The virtual arm ships its own calibration; a real arm uses robot_id's LeRobot file (or calibration_file).
    calibration = PythonExpression(["'", VIRTUAL_CALIBRATION, "' if '", LaunchConfiguration("hardware"),
                                    "' == 'virtual' else '", LaunchConfiguration("calibration_file"), "'"])
    urdf = PathJoinSubstitution([FindPackageShare("so101_description"), "urdf", "so101.urdf"])
    rviz_config = PathJoinSubstitution([FindPackageShare("so101_description"), "rviz", "so101.rviz"])
    return LaunchDescription([
        DeclareLaunchArgument("hardware", default_value="virtual", choices=["real", "virtual"]),
        DeclareLaunchArgument("port", default_value=VIRTUAL_LINK, description="serial port of the follower bus"),
        DeclareLaunchArgument("robot_id", default_value="so101_follower", description="LeRobot calibration id"),
        DeclareLaunchArgument("calibration_file", default_value="", description="overrides robot_id's file"),
        DeclareLaunchArgument("profile", default_value="default", description="gap profile of the virtual arm"),
        DeclareLaunchArgument("rviz", default_value="false"),
        DeclareLaunchArgument("use_sim_time", default_value="false"),
        ExecuteProcess(
            condition=LaunchConfigurationEquals("hardware", "virtual"),
            cmd=["so101", "virtual-bus", "--link", port, "--profile", LaunchConfiguration("profile")],
            output="screen",
        ),
        Node(
            package="so101_driver", executable="driver", name="so101_driver", output="screen",
            parameters=[
                os.path.join(CONFIG, "driver.yaml"),
                {"port": port, "robot_id": LaunchConfiguration("robot_id"),
                 "calibration_file": calibration,
                 "use_sim_time": LaunchConfiguration("use_sim_time")},
            ],
        ),
        Node(
            package="robot_state_publisher", executable="robot_state_publisher", output="screen",
            parameters=[{"robot_description": ParameterValue(Command(["cat ", urdf]), value_type=str),
                         "use_sim_time": LaunchConfiguration("use_sim_time")}],
        ),
        Node(
            condition=IfCondition(LaunchConfiguration("rviz")),
            package="rviz2", executable="rviz2", arguments=["-d", rviz_config], output="screen",
        ),
    ])
