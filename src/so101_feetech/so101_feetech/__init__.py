"""The Feetech STS3215 protocol, control table and LeRobot calibration format, shared by the SO-101 driver and the virtual SO-101."""
