"""Sim replay (Isaac Sim bridge, MuJoCo), paired real/sim datasets, SAGE I/O and gap reports."""
