"""ROS-free types and file-format helpers shared by every so101 package (imports nothing of ours)."""
