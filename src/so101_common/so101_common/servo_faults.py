"""Servo faults as the driver reports them on ``/diagnostics``, and the spans of time they cover (no rclpy).

The contract between the driver and everything that must not mistake a fault for a gap (recorder,
``so101 demo``, ``so101 run-motion``, pairing, reports, training): each servo's ``DiagnosticStatus``
carries its joint under :data:`JOINT_KEY` and, while the servo is in a protection state or lost, the
fault kinds under :data:`FAULTS_KEY` (comma-separated :class:`ServoFaultKind` values). A consumer reads
one status with :func:`read_servo_fault` and turns a stream of them into :class:`FaultSpan` records with
:class:`FaultSpanTracker`.

Faults are the servo's protections (its error byte: overload, overheat, voltage, overcurrent, angle
sensor) and a servo the driver has taken out of the control cycle after repeated silence (``lost``).
A single missed reply is a bus statistic, not a fault.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from so101_common.paired_dataset import FaultSpan

__all__ = ["FAULTS_KEY", "JOINT_KEY", "SERVO_TELEMETRY", "ServoFaultKind", "ServoFault", "read_servo_fault", "read_servo_faults", "FaultSpanTracker",
           "format_fault", "REMEDIES"]

JOINT_KEY = "joint"  # DiagnosticStatus value: the joint the status is about
FAULTS_KEY = "faults"  # DiagnosticStatus value: the fault kinds now present, comma-separated
SERVO_TELEMETRY = {  # DiagnosticStatus values of a servo that answers: quantity → (key, unit)
    "temperature": ("temperature_c", "°C"),
    "load": ("load_permille", "‰"),  # signed, of the servo's maximum torque
    "voltage": ("voltage_v", "V"),
    "current": ("current_a", "A"),
}


class ServoFaultKind(enum.StrEnum):
    """What stopped a servo from doing its job. The first five are the STS3215's error-byte bits."""

    OVERLOAD = "overload"
    OVERHEAT = "overheat"
    VOLTAGE = "voltage"
    OVERCURRENT = "overcurrent"
    ANGLE_SENSOR = "angle_sensor"
    LOST = "lost"  # no reply for so many cycles that the driver took it out of the control cycle


# What a user does about each fault, said where the fault is reported.
REMEDIES = {
    ServoFaultKind.OVERLOAD: "the joint is blocked or carries too much: clear its way or lighten the load",
    ServoFaultKind.OVERHEAT: "let the servos cool for a few minutes (torque off), then play less in one go (shorter "
                             "or fewer motions; so101 demo: --excitation 2, --excitation-seconds 20)",
    ServoFaultKind.VOLTAGE: "check the supply: 12 V for a 12 V arm, rated for the arm's current, its cable seated",
    ServoFaultKind.OVERCURRENT: "the joint is blocked or driven hard: clear its way, then run again",
    ServoFaultKind.ANGLE_SENSOR: "the servo's encoder reports an error: power-cycle the arm; if it stays, replace the servo",
    ServoFaultKind.LOST: "check the bus cable and the servo's ID (so101 scan)",
}


@dataclass(frozen=True)
class ServoFault:
    """One servo's faults in one status report."""

    joint: str
    kinds: tuple[ServoFaultKind, ...]
    message: str  # the status message, as the driver wrote it


def read_servo_fault(values: Mapping[str, str], message: str = "") -> ServoFault | None:
    """The faults one ``DiagnosticStatus`` reports (its key/values as a mapping), None when it is not a
    servo's status. A servo's status without faults gives a :class:`ServoFault` with no kinds (the
    fault is over). Unknown kind names raise ``ValueError``: a newer driver's fault must not pass unseen."""
    joint = values.get(JOINT_KEY)
    if not joint:
        return None
    text = values.get(FAULTS_KEY, "")
    kinds = tuple(ServoFaultKind(part.strip()) for part in text.split(",") if part.strip())
    return ServoFault(joint, kinds, message)


def read_servo_faults(statuses: Iterable[tuple[Mapping[str, str], str]]) -> list[ServoFault]:
    """The servo faults of a whole ``/diagnostics`` array, given as (key/values, message) per status (see
    :func:`read_servo_fault`; statuses that are not a servo's are skipped)."""
    return [fault for values, message in statuses if (fault := read_servo_fault(values, message))]


def format_fault(span: FaultSpan) -> str:
    """One line for the console and reports."""
    end = "until the end" if span.end is None else f"to {span.end:.2f} s"
    return f"{span.joint}: {span.fault} from {span.start:.2f} s {end}" + (f" ({span.message})" if span.message else "")


class FaultSpanTracker:
    """Turns status reports into spans: a span opens at the first report of a (joint, kind) and closes at
    the first report of that joint without it. Times are whatever clock the caller stamps reports with."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, ServoFaultKind], FaultSpan] = {}
        self._closed: list[FaultSpan] = []

    def observe(self, stamp: float, faults: Iterable[ServoFault]) -> list[FaultSpan]:
        """Take one report (every servo status in one ``/diagnostics`` message); returns the spans it opened."""
        opened = []
        for fault in faults:
            for key in [k for k in self._open if k[0] == fault.joint and k[1] not in fault.kinds]:
                self._closed.append(self._open.pop(key).model_copy(update={"end": stamp}))
            for kind in fault.kinds:
                if (fault.joint, kind) not in self._open:
                    span = FaultSpan(joint=fault.joint, fault=kind.value, start=stamp, message=fault.message)
                    self._open[(fault.joint, kind)] = span
                    opened.append(span)
        return opened

    @property
    def active(self) -> bool:
        return bool(self._open)

    def spans(self) -> list[FaultSpan]:
        """Every span so far, closed and open (``end`` None), in order of their start."""
        return sorted([*self._closed, *self._open.values()], key=lambda s: (s.start, s.joint, s.fault))
