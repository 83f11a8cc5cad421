"""The benchmark runs and reports in the team's BenchResult format."""

from __future__ import annotations

import json

from so101_safety.bench import benchmarks


def test_benchmarks_report_step_latency_beside_the_baseline():
    results = list(benchmarks(count=500))
    assert [r.name for r in results] == ["safety.step_latency_p50", "safety.step_latency_p99"]
    for r in results:
        assert r.unit == "us" and r.better == "lower" and r.value > 0 and r.baseline > 0
        record = json.loads(r.to_json())
        assert record["ratio"] > 0 and record["baseline_name"]
    assert results[1].target is not None
