"""Policy deployment: policy → GapONet compensator → safety filter → driver.

    ros2 launch launch/deploy.launch.py hardware:=real policy_path:=outputs/train/act_so101/pretrained_model
    ros2 launch launch/deploy.launch.py compensation:=false      # policy straight into the safety filter
"""

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "config")
DEFAULT_MODEL = os.path.join(HERE, "..", "models", "gaponet_so101_default.onnx")


def generate_launch_description() -> LaunchDescription:
    compensation = LaunchConfiguration("compensation")
    safety_params = [os.path.join(CONFIG, "safety.yaml")]
    return LaunchDescription([
        DeclareLaunchArgument("hardware", default_value="virtual", choices=["real", "virtual"]),
        DeclareLaunchArgument("policy_path", description="LeRobot pretrained_model dir, TorchScript or ONNX file"),
        DeclareLaunchArgument("compensation", default_value="true", choices=["true", "false"]),
        DeclareLaunchArgument("gaponet_model", default_value=DEFAULT_MODEL),
        DeclareLaunchArgument("record", default_value="false"),
        IncludeLaunchDescription(os.path.join(HERE, "robot.launch.py"),
                                 launch_arguments={"hardware": LaunchConfiguration("hardware")}.items()),
        Node(package="so101_policy", executable="policy", name="policy", output="screen",
             parameters=[os.path.join(CONFIG, "policy.yaml"), {"policy_path": LaunchConfiguration("policy_path")}]),
        Node(condition=IfCondition(compensation),
             package="so101_gaponet", executable="compensator", name="compensator", output="screen",
             parameters=[os.path.join(CONFIG, "compensator.yaml"),
                         {"model_path": LaunchConfiguration("gaponet_model")}]),
        Node(condition=IfCondition(compensation),
             package="so101_safety", executable="safety_filter", name="safety_filter", output="screen",
             parameters=safety_params,
             remappings=[("input", "gaponet/joint_command"), ("output", "joint_command")]),
        Node(condition=UnlessCondition(compensation),
             package="so101_safety", executable="safety_filter", name="safety_filter", output="screen",
             parameters=safety_params,
             remappings=[("input", "policy/joint_command"), ("output", "joint_command")]),
        Node(condition=IfCondition(LaunchConfiguration("record")),
             package="so101_recorder", executable="recorder", name="recorder", output="screen",
             parameters=[os.path.join(CONFIG, "recorder.yaml")]),
    ])
