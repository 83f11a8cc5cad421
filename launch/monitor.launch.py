"""Live monitoring in RViz: the measured arm and, as a ghost, the commanded arm.

Run beside robot/teleop/deploy (on the robot or on a laptop on the same ROS domain):
    ros2 launch launch/monitor.launch.py
"""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import Command, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    share = FindPackageShare("so101_description")
    description = ParameterValue(Command(["cat ", PathJoinSubstitution([share, "urdf", "so101.urdf"])]), value_type=str)
    return LaunchDescription([
        DeclareLaunchArgument("command_topic", default_value="/joint_command",
                              description="command stage to show as the ghost arm"),
        DeclareLaunchArgument("use_sim_time", default_value="false"),
        # The commanded arm: a second robot_state_publisher under the "commanded/" TF prefix,
        # its base pinned onto the measured arm's base so RViz draws both in one place.
        Node(package="tf2_ros", executable="static_transform_publisher",
             arguments=["--frame-id", "base_link", "--child-frame-id", "commanded/base_link"]),
        Node(package="robot_state_publisher", executable="robot_state_publisher", namespace="commanded",
             parameters=[{"robot_description": description, "frame_prefix": "commanded/",
                          "use_sim_time": LaunchConfiguration("use_sim_time")}],
             remappings=[("joint_states", LaunchConfiguration("command_topic"))]),
        Node(package="rviz2", executable="rviz2", output="screen",
             arguments=["-d", PathJoinSubstitution([share, "rviz", "so101_monitor.rviz"])],
             parameters=[{"use_sim_time": LaunchConfiguration("use_sim_time")}]),
    ])
