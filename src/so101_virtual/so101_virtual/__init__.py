"""The virtual SO-101: STS3215 protocol served on a pseudo-terminal over a MuJoCo arm with servo firmware, backlash, friction and faults."""
