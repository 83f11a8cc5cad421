"""Feetech STS3215 bus client, LeRobot calibration and the SO-101 driver and leader nodes."""
