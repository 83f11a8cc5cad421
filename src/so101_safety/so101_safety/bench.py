"""Safety filter benchmarks: the latency of one :meth:`SafetyFilter.step` in-process.

The filter runs a realistic load: a full 6-joint command (a slow sinusoid, so joints are rate
limited part of the time) and a measured state arrive before every step, outside the timed region;
only ``step(now)`` is timed. Baseline, same run and same vector: ``numpy.clip`` of the 6 positions
to the limits (what a filter that only clips would cost). Latency ratios are ``baseline / value``.
Target: p99 ≤ 500 µs, 5 % of the 10 ms control period at 100 Hz (rclpy's own callback overhead is of the
same order); the p50 is the figure to compare across changes, p99 mostly measures the machine's load.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np

from so101_common.bench import BenchResult, percentile
from so101_safety.config import SafetyConfig
from so101_safety.core import SafetyFilter

__all__ = ["benchmarks", "step_latencies", "clip_latencies"]

TARGET_P99_US = 500.0
_BASELINE = "numpy.clip of the 6-joint vector (same run)"


def step_latencies(count: int, config: SafetyConfig | None = None) -> list[float]:
    """Seconds per ``step`` call over ``count`` simulated 100 Hz ticks."""
    f = SafetyFilter(config or SafetyConfig())
    names = f.names
    dt = 1.0 / f.config.rate_hz
    samples = []
    for k in range(count):
        t = k * dt
        command = [0.8 * math.sin(0.5 * t + j) for j in range(len(names))]
        f.on_measured(names, command, (), (), t)
        f.on_command(names, command, t)
        start = time.perf_counter()
        f.step(t)
        samples.append(time.perf_counter() - start)
    return samples


def clip_latencies(count: int, config: SafetyConfig | None = None) -> list[float]:
    limits = (config or SafetyConfig()).limits
    lower = np.array([lim.lower for lim in limits])
    upper = np.array([lim.upper for lim in limits])
    samples = []
    for k in range(count):
        vector = np.array([0.8 * math.sin(0.005 * k + j) for j in range(len(limits))])
        start = time.perf_counter()
        np.clip(vector, lower, upper)
        samples.append(time.perf_counter() - start)
    return samples


def benchmarks(count: int = 20_000) -> Iterator[BenchResult]:
    step_latencies(min(count, 1000))  # warm-up
    steps = step_latencies(count)
    clips = clip_latencies(count)
    for q in (50, 99):
        yield BenchResult(
            name=f"safety.step_latency_p{q}", value=percentile(steps, q) * 1e6, unit="us",
            baseline=percentile(clips, q) * 1e6, baseline_name=_BASELINE, better="lower",
            target=TARGET_P99_US if q == 99 else None)


if __name__ == "__main__":  # pragma: no cover - `so101 bench --only so101_safety.bench` is the entry point
    for result in benchmarks():
        print(result.to_json())
