#!/usr/bin/env bash
# Source ROS 2 Jazzy and the workspace overlay, then run the command (ros2 launch ..., so101 ..., bash).
set -e
source /opt/ros/jazzy/setup.bash
source /ws/install/setup.bash
exec "$@"
