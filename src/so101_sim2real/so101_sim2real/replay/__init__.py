"""Replay in simulation: the sources (bags, SAGE motion files and real runs), the MuJoCo backend, outputs and the live schedule."""
