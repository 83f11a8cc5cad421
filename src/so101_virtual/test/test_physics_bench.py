"""The physics benchmark runs and reports in the team's BenchResult format."""

from __future__ import annotations

import json

from so101_virtual.bench import benchmarks


def test_physics_benchmark_reports_its_cost_beside_mujoco_alone():
    results = list(benchmarks(simulated_s=0.3, repeats=1))
    assert [r.name for r in results] == ["virtual.physics_cpu_per_simulated_s"]
    result = results[0]
    assert result.unit == "s/s" and result.better == "lower"
    assert result.value > result.baseline > 0  # the firmware and register layer costs something over MuJoCo
    assert json.loads(result.to_json())["baseline_name"]
