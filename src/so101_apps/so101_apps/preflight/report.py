"""What a preflight found: one result per check (pass / warn / fail / skip, the measured value and the limit),
printed one line each and written as a JSON report (no rclpy)."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from so101_common.atomic_output import write_text_atomically

__all__ = ["Status", "CheckResult", "PreflightReport", "REPORT_NAME", "worst"]

REPORT_NAME = "preflight.json"


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"  # the arm may run, but look at this (or the check could not be made: it says why)
    FAIL = "fail"  # do not run a policy on this arm until it is fixed
    SKIP = "skip"  # not run: a check it depends on failed (the line says which)


@dataclass(frozen=True)
class CheckResult:
    """One check: ``measured`` and ``limit`` as text with their units, ``detail`` what it means or what to do,
    ``joints`` the joints at fault, ``values`` the figures behind it for the JSON report."""

    check: str  # stable id, e.g. "supply_voltage", "calibration.elbow_flex"
    status: Status
    measured: str
    limit: str
    detail: str = ""
    joints: tuple[str, ...] = ()
    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def skipped(cls, check: str, because: str) -> CheckResult:
        return cls(check, Status.SKIP, "not measured", "-", because)

    def line(self, width: int = 28) -> str:
        text = f"{self.status.value.upper():4}  {self.check:<{width}} {self.measured}  (limit: {self.limit})"
        return f"{text}  {self.detail}" if self.detail else text

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status.value, "measured": self.measured, "limit": self.limit,
                "detail": self.detail, "joints": list(self.joints), "values": self.values}


@dataclass
class PreflightReport:
    """Every check of one run, in the order they ran."""

    robot: str  # "virtual" or "real"
    port: str
    calibration_file: str
    results: list[CheckResult] = field(default_factory=list)
    duration_s: float = 0.0

    def add(self, results: CheckResult | Iterable[CheckResult]) -> list[CheckResult]:
        """Append ``results``; returns them (so a caller can print them as they come)."""
        new = [results] if isinstance(results, CheckResult) else list(results)
        self.results.extend(new)
        return new

    def result(self, check: str) -> CheckResult:
        return next(r for r in self.results if r.check == check)

    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status is Status.FAIL]

    def with_status(self, status: Status) -> list[str]:
        return [r.check for r in self.results if r.status is status]

    @property
    def passed(self) -> bool:
        """No check failed (warnings and skipped checks allowed; a skip only follows a failure)."""
        return not self.failed()

    def summary(self) -> str:
        counts = {s: len(self.with_status(s)) for s in Status}
        verdict = "PASSED" if self.passed else "FAILED"
        tail = f": {', '.join(r.check for r in self.failed())}" if not self.passed else ""
        return (f"preflight {verdict} in {self.duration_s:.0f} s: {counts[Status.PASS]} pass, {counts[Status.WARN]} warn, "
                f"{counts[Status.FAIL]} fail, {counts[Status.SKIP]} skipped{tail}")

    def to_dict(self) -> dict[str, Any]:
        return {"result": "pass" if self.passed else "fail", "robot": self.robot, "port": self.port,
                "calibration_file": self.calibration_file, "duration_s": round(self.duration_s, 2),
                "checks": [r.to_dict() for r in self.results]}

    def write(self, folder: Path) -> Path:
        """``folder/preflight.json``, complete or absent (``so101_common.atomic_output``)."""
        text = json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False) + "\n"
        return write_text_atomically(folder / REPORT_NAME, text)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def worst(statuses: Sequence[Status]) -> Status:
    """The worst of ``statuses`` (fail > warn > pass; skip only when nothing ran)."""
    for status in (Status.FAIL, Status.WARN, Status.PASS):
        if status in statuses:
            return status
    return Status.SKIP
