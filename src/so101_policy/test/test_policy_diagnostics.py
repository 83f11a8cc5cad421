"""The policy node's /diagnostics decision, without ROS: what each runner state reports."""

from __future__ import annotations

from dataclasses import replace

from so101_common.diagnostics import Level
from so101_policy.diagnostics import NodeCounters, PolicyDiagnostics
from so101_policy.runner import RunnerStats
from so101_policy.spec import PolicySpec

RUNNING = RunnerStats(running=True, ticks=100, fresh=90, missed=0, waiting=0, inferences=10, errors=0,
                      dropped_stale=0, queue_depth=3, pending=False, latency_last_ms=5.0, latency_p50_ms=5.0,
                      latency_p99_ms=8.0, latency_max_ms=9.0, last_error="", observation_age_s=0.01)


def _diagnostics() -> PolicyDiagnostics:
    spec = PolicySpec(kind="onnx", source="m.onnx", policy_type="onnx", chunk_size=10, n_action_steps=10)
    return PolicyDiagnostics(spec, rate_hz=30.0, n_action_steps=10, max_observation_age_s=0.5)


def test_each_state_gives_its_level_and_message():
    d = _diagnostics()
    counters = NodeCounters(published=90)
    assert (d.report(replace(RUNNING, running=False), counters, []).level, "stopped") == (Level.OK, "stopped")
    ok = d.report(RUNNING, counters, [])
    assert (ok.level, ok.message) == (Level.OK, "running")
    assert ok.values["published"] == "90" and ok.values["running"] == "true" and ok.values["rate_hz"] == "30.0"
    assert d.report(replace(RUNNING, observation_age_s=float("inf")), counters, []).message == "waiting for /joint_states"
    images = d.report(RUNNING, counters, ["observation.images.front"])
    assert (images.level, images.message) == (Level.WARN, "waiting for images ['observation.images.front']")
    stale = d.report(replace(RUNNING, observation_age_s=0.75), counters, [])
    assert (stale.level, stale.message) == (Level.WARN, "/joint_states stale (0.75 s)")


def test_misses_and_errors_are_reported_once_per_period():
    d = _diagnostics()
    late = replace(RUNNING, missed=3)
    assert d.report(late, NodeCounters(), []).message == "inference late: 3 missed tick(s)"
    assert d.report(late, NodeCounters(), []).level == Level.OK  # nothing new since the previous report
    failing = replace(late, errors=1, last_error="boom")
    report = d.report(failing, NodeCounters(), [])
    assert (report.level, report.message) == (Level.ERROR, "inference failing: boom")
    assert d.report(failing, NodeCounters(), []).level == Level.OK
