"""Safety filter between command sources and the SO-101 driver."""
