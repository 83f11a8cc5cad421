"""Benchmark results as the JSON lines ``make bench`` prints.

Every figure stands beside a baseline measured in the same run, so numbers compare across
machines as ratios: ``ratio = value / baseline`` for rates (higher is better) and
``baseline / value`` for latencies (higher is better too); ``better`` says which way ``value`` goes.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = ["BenchResult", "time_calls", "percentile"]


@dataclass(frozen=True)
class BenchResult:
    name: str  # dotted, e.g. "driver.cycle_rate"
    value: float
    unit: str  # "Hz", "ms", "x realtime", "msg/s" ...
    baseline: float  # the same quantity for the baseline measured in this run
    baseline_name: str  # what the baseline is
    better: str = "higher"  # "higher" or "lower": which direction of value is better
    target: float | None = None  # the target for value, if any

    @property
    def ratio(self) -> float:
        if self.value == 0 or self.baseline == 0:
            return float("nan")
        return self.value / self.baseline if self.better == "higher" else self.baseline / self.value

    def to_json(self) -> str:
        record = asdict(self)
        record["ratio"] = round(self.ratio, 3)
        if self.target is not None:
            record["meets_target"] = self.value >= self.target if self.better == "higher" else self.value <= self.target
        return json.dumps(record)


def time_calls(fn: Callable[[], object], count: int) -> list[float]:
    """Wall time of ``count`` calls of ``fn``, in seconds each."""
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def percentile(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``samples`` (inclusive method)."""
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]
