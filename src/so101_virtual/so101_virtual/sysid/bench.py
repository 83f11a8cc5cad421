"""Benchmarks of the virtual SO-101's system identification (``so101 bench``, JSON lines).

``virtual.fit_profile_time_per_recorded_minute``: wall seconds ``fit_profile`` takes per minute of
fitted recording, for one Levenberg–Marquardt iteration over every default parameter (a full fit
costs about ``iterations`` times that), beside the baseline of simulating the same recording once
(the simulation alone): their ratio is how many simulations of the data one iteration costs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from so101_common.bench import BenchResult
from so101_virtual.profiles import load_profile
from so101_virtual.sysid.fit import FitConfig, fit_profile
from so101_virtual.sysid.recording import Recording
from so101_virtual.sysid.simulate import simulate

__all__ = ["benchmarks"]

_SECONDS = 10.0
_RATE = 50.0


def _recording() -> Recording:
    """A 10 s multi-joint sine sweep around a reaching pose, as the default arm tracks it."""
    time_s = np.arange(int(_SECONDS * _RATE)) / _RATE
    centre = np.array([0.0, -0.8, 0.8, 0.4, 0.0, 0.3])
    command = centre + 0.15 * np.sin(2 * np.pi * np.outer(time_s, [0.3, 0.4, 0.5, 0.6, 0.7, 0.2]))
    probe = Recording("bench", time_s, command, np.tile(command[0], (len(time_s), 1)))
    return Recording("bench", time_s, command, simulate("default", probe))


def benchmarks() -> Iterator[BenchResult]:
    recording = _recording()
    base = load_profile("unfitted")
    minutes = recording.duration / 60.0
    start = time.perf_counter()
    simulate(base, recording)
    simulation = (time.perf_counter() - start) / minutes
    start = time.perf_counter()
    fit_profile(base, [recording], FitConfig(iterations=1, window=_SECONDS))
    fit = (time.perf_counter() - start) / minutes
    yield BenchResult("virtual.fit_profile_time_per_recorded_minute", fit, "s/min", simulation,
                      "one simulation of the same recording", better="lower")
