"""What a session of recorded motions is made of, without ROS: the motions to play, what was recorded of
each, the fault stop, the virtual arm's process and the console lines (:mod:`so101_apps.session` runs
them through the deploy graph; ``so101 demo`` and ``so101 run-motion`` read its results)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from so101_bringup.children import raise_for_child, run_child
from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import format_fault
from so101_common.waiting import wait_for

__all__ = ["MotionSpec", "RecordedMotion", "ServoFaultStop", "start_virtual_arm", "stop_virtual_arm",
           "table_header", "table_row", "rate_line"]

RATE_WARN_FRACTION = 0.9  # joint states below this fraction of the driver's rate: the machine is overloaded


@dataclass(frozen=True)
class MotionSpec:
    name: str  # episode name (the motion's stem)
    source: str  # built-in motion name, excitation-<seed> or SAGE motion file
    seconds: float = 0.0  # duration of a built-in motion (0 = its default)


@dataclass(frozen=True)
class RecordedMotion:
    bag: Path  # the episode's bag folder
    start: float  # s on the ROS clock (the recorded messages' stamps) when the motion started
    stop: float  # ... when it ended or was stopped
    state_rate_hz: float  # joint states received per second while it played (the chain's health)
    faults: tuple[FaultSpan, ...] = ()  # s since the motion started


class ServoFaultStop(RuntimeError):
    """A servo fault stopped a motion; the recordings so far are kept (``recorded``)."""

    def __init__(self, motion: str, spans: Sequence[FaultSpan], recorded: dict[str, RecordedMotion]) -> None:
        self.motion, self.spans, self.recorded = motion, list(spans), dict(recorded)
        faults = "; ".join(format_fault(span) for span in spans)
        kept = ", ".join(str(r.bag) for r in recorded.values()) or "nothing"
        super().__init__(f"servo fault during {motion} (s from its start): {faults}; motion stopped, "
                         f"arm held where it was; recordings kept: {kept}")


def start_virtual_arm(profile: str, folder: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``so101 virtual-bus`` in its own process (as the launch files start it): its physics thread
    then never competes with the driver for this interpreter's GIL. Returns (process, link, calibration)."""
    folder.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "so101_apps.cli", "virtual-bus"]
    run_child([*cli, "--write-calibration", str(folder)], "the virtual SO-101 could not write its calibration")
    link = folder / "so101_follower"
    log_path = folder / "virtual_bus.log"
    log = log_path.open("wb")
    process = subprocess.Popen([*cli, "--link", str(link), "--profile", profile], stdout=log, stderr=subprocess.STDOUT)
    if not wait_for(lambda: link.exists() or process.poll() is not None, timeout=60.0) or process.poll() is not None:
        process.kill()
        process.wait()
        log.close()
        raise_for_child("the virtual SO-101 did not start", process.returncode,
                        log_path.read_text(errors="replace"), log_path)
    return process, link, folder / "virtual_follower.json"


def stop_virtual_arm(process: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as a terminal would; killed if it has not exited within 10 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


def table_header() -> str:
    return "   t[s] | " + "  ".join(f"{SHORT_NAMES[n]:>15}" for n in JOINT_NAMES) + "   measured (command - measured), rad"


def table_row(seconds: float, measured: Iterable[float], commanded: Iterable[float]) -> str:
    cells = "  ".join(f"{m:+6.3f} ({c - m:+6.3f})" for m, c in zip(measured, commanded, strict=True))
    return f" {seconds:6.1f} | {cells}"


def rate_line(message: str, state_rate_hz: float, driver_rate_hz: float) -> str:
    """The recording's line: where it went and the chain's health, with a warning when joint states came late."""
    line = f"   recorded: {message}; joint states at {state_rate_hz:.0f} Hz (driver: {driver_rate_hz:g} Hz)"
    if state_rate_hz < RATE_WARN_FRACTION * driver_rate_hz:
        line += (f"\n   WARNING: the chain delivered joint states at {state_rate_hz / driver_rate_hz:.0%} of the driver's "
                 "rate: this machine is overloaded, and the recording shows it (late commands, lag) on top of the arm's gap")
    return line
