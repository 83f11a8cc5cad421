"""The filter's own /diagnostics status report."""

from __future__ import annotations

from so101_common.diagnostics import Level
from so101_common.joints import JOINT_NAMES
from so101_safety.core import SafetyFilter
from so101_safety.diagnostics import status_report


def test_status_levels():
    f = SafetyFilter()
    report = status_report(f.last, f.stats)
    assert report.level is Level.WARN and "waiting" in report.message
    f.estop("early")
    assert status_report(f.last, f.stats, estop_reason=f.estop_reason).level is Level.ERROR
    f.reset()
    f.on_measured(JOINT_NAMES, [0.0] * 6, [], [], 0.0)
    f.step(0.0)
    assert status_report(f.last, f.stats).level is Level.WARN  # holding: no command yet
    f.on_command(JOINT_NAMES, [0.0] * 6, 0.01)
    f.on_command(["bogus"], [0.0], 0.01)
    f.step(0.02)
    ok = status_report(f.last, f.stats)
    assert ok.level is Level.OK and ok.values["commands_rejected"] == "1" and ok.values["rejected_unknown_joint"] == "1"
    warn = status_report(f.last, f.stats, rejected_since_last=1)
    assert warn.level is Level.WARN and "rejected" in warn.message
    f.estop("button")
    f.step(0.03)
    err = status_report(f.last, f.stats)
    assert err.level is Level.ERROR and "button" in err.message and err.values["state"] == "estopped"
