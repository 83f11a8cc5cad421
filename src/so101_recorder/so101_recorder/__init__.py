"""Episode recorder: raw rosbag2 (MCAP) recording of SO-101 topics with metadata."""
