"""ROS 2 helpers shared by the node shells (the only workspace library besides the nodes that imports rclpy)."""
