"""What a session of recorded motions is made of, without ROS: the motions to play, what was recorded of
each, the fault stop, the virtual arm's process and the console lines (:mod:`so101_apps.session` runs
them through the deploy graph; ``so101 demo`` and ``so101 run-motion`` read its results)."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_apps.arm_watch import StateGap
from so101_bringup.children import raise_for_child, run_child
from so101_common.joints import JOINT_NAMES, SHORT_NAMES
from so101_common.paired_dataset import FaultSpan
from so101_common.servo_faults import REMEDIES, ServoFaultKind, format_fault
from so101_common.waiting import wait_for
from so101_driver.health import BUS_FAULT_COUNT_KEYS, CYCLE_CAPACITY_KEY, MISSED_CYCLES_KEY
from so101_virtual.lag import LagHistogram, read_status_file
from so101_virtual.profiles import load_profile

__all__ = ["MotionSpec", "RecordedMotion", "ServoFaultStop", "start_virtual_arm", "stop_virtual_arm", "virtual_arm_lag",
           "table_header", "table_row", "BusFigures", "rate_cause", "stall_cause", "stalled", "rate_line",
           "physics_lag_warning", "physics_lagged"]

RATE_WARN_FRACTION = 0.9  # joint states below this fraction of the driver's rate: the recording shows the chain
BUS_FAULTS_PER_S = 1.0  # retries + timeouts per second the driver reports above which the bus itself is failing
# the virtual arm's physics this far behind wall time (a driver period: its servos answer with an arm a sample older)
# for this share of a recording or more: the recording shows this machine's CPU on top of the arm's gap
PHYSICS_LAG_WARN_MS = 10.0
PHYSICS_LAG_WARN_FRACTION = 0.1
VIRTUAL_ARM_STATUS = "virtual_bus_status.json"  # the virtual arm's status file in its folder (how far it lags)
# no joint state for this many of the driver's periods: the arm held its goal or the chain lost its state that long
# (a 0.3 s stall took 14 points of wrist roll's cut out of one `make demo`), which the mean rate does not show
STALL_PERIODS = 10
# diagnostics windows (the driver's are 1 s) it takes to tell a driver's usual missed cycles (a bus round-trip longer
# than its period misses some every second) from the ones of a stall
USUAL_MISSES_WINDOWS = 3


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
    state_gap: StateGap = StateGap()  # the longest time without a joint state while it played
    driver_rate_hz: float = math.nan  # the driver's configured cycle rate
    faults: tuple[FaultSpan, ...] = ()  # s since the motion started
    # °C per joint (JOINT_NAMES order; NaN: not reported) as the servos last reported at the start and at the end
    temperature_start: tuple[float, ...] = (math.nan,) * len(JOINT_NAMES)
    temperature_end: tuple[float, ...] = (math.nan,) * len(JOINT_NAMES)
    physics_lag: LagHistogram | None = None  # how far the virtual arm's physics ran behind wall time while it played

    @property
    def stalled(self) -> bool:
        """Whether the chain stalled while it played (:func:`stalled`)."""
        return stalled(self.state_gap, self.driver_rate_hz)

    @property
    def heating(self) -> np.ndarray:
        """°C each servo warmed while the motion played (0 where it cooled or did not report)."""
        rise = np.asarray(self.temperature_end, dtype=float) - np.asarray(self.temperature_start, dtype=float)
        return np.clip(np.nan_to_num(rise), 0.0, None)


class ServoFaultStop(RuntimeError):
    """A servo fault stopped a motion; the recordings so far are kept (``recorded``)."""

    def __init__(self, motion: str, spans: Sequence[FaultSpan], recorded: dict[str, RecordedMotion]) -> None:
        self.motion, self.spans, self.recorded = motion, list(spans), dict(recorded)
        faults = "; ".join(format_fault(span) for span in spans)
        kept = ", ".join(str(r.bag) for r in recorded.values()) or "nothing"
        kinds = dict.fromkeys(span.fault for span in spans)
        todo = "; ".join(f"{kind}: {REMEDIES[ServoFaultKind(kind)]}" for kind in kinds if kind in REMEDIES)
        super().__init__(f"servo fault during {motion} (times from its start): {faults}; motion stopped, "
                         f"arm held where it was; recordings kept: {kept}" + (f". What to do: {todo}" if todo else ""))


def start_virtual_arm(profile: str, folder: Path) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``so101 virtual-bus`` in its own process (as the launch files start it): its physics thread
    then never competes with the driver for this interpreter's GIL. Returns (process, link, calibration).
    A profile that does not load is refused before anything is started or written."""
    load_profile(profile)
    folder.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "so101_apps.cli", "virtual-bus"]
    run_child([*cli, "--write-calibration", str(folder)], "the virtual SO-101 could not write its calibration")
    link = folder / "so101_follower"
    log_path = folder / "virtual_bus.log"
    log = log_path.open("wb")
    process = subprocess.Popen([*cli, "--link", str(link), "--profile", profile, "--status-file",
                                str(folder / VIRTUAL_ARM_STATUS)], stdout=log, stderr=subprocess.STDOUT)
    if not wait_for(lambda: link.exists() or process.poll() is not None, timeout=60.0) or process.poll() is not None:
        process.kill()
        process.wait()
        log.close()
        raise_for_child("the virtual SO-101 did not start", process.returncode,
                        log_path.read_text(errors="replace"), log_path)
    return process, link, folder / "virtual_follower.json"


def virtual_arm_lag(folder: Path) -> LagHistogram | None:
    """How far the physics of the virtual arm :func:`start_virtual_arm` started in ``folder`` has run behind
    wall time so far (its status file, updated twice a second); None before its first update."""
    try:
        return read_status_file(folder / VIRTUAL_ARM_STATUS)
    except (OSError, ValueError):
        return None


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


@dataclass(frozen=True)
class BusFigures:
    """What the driver measured of its bus over a recording: medians of its ``/diagnostics`` bus entries, and what
    its counts rose by."""

    achieved_hz: float  # cycles per second it ran
    capacity_hz: float  # 1 / the mean duration of a cycle: the most the bus round-trip allows
    faults_per_s: float  # retries + timeouts per second
    missed_cycles: int = 0  # cycles it did not run on time
    bus_faults: int = 0  # retries, timeouts and corrupt replies
    # from its windows, where there are USUAL_MISSES_WINDOWS or more: the median of its missed cycles per second, and
    # the most it missed beyond that rate within two consecutive windows (a stall's); None: too few windows to tell
    usual_missed_per_s: float = 0.0
    stall_missed: int | None = None

    @classmethod
    def of(cls, entries: Sequence[Mapping[str, str]], before: Mapping[str, str] | None = None) -> BusFigures | None:
        """From the driver's bus entries (values as published) and, for its counts, its last entry ``before`` the
        recording (without it, the counts rise from the first entry); None without any."""
        rows = []
        for values in entries:
            try:
                rows.append((float(values["achieved_rate_hz"]), float(values[CYCLE_CAPACITY_KEY]),
                             float(values["retries_per_s"]) + float(values["timeouts_per_s"])))
            except (KeyError, ValueError):
                continue
        if not rows:
            return None
        achieved, capacity, faults = (float(np.median(column)) for column in zip(*rows, strict=True))
        first, last = before or entries[0], entries[-1]

        def rise(keys: Sequence[str]) -> int:
            try:
                return sum(int(last[key]) - int(first[key]) for key in keys)
            except (KeyError, ValueError):
                return 0
        usual, stall = _missed_beyond_usual([first, *entries] if before is not None else list(entries))
        return cls(achieved, capacity, faults, rise([MISSED_CYCLES_KEY]), rise(BUS_FAULT_COUNT_KEYS), usual, stall)


def _missed_beyond_usual(entries: Sequence[Mapping[str, str]]) -> tuple[float, int | None]:
    """``(usual missed cycles per second, the most missed beyond that within two consecutive windows)`` from the
    driver's counts in consecutive bus entries and each entry's window; ``(0, None)`` with fewer than
    :data:`USUAL_MISSES_WINDOWS` windows. A bus round-trip longer than the driver's period misses cycles all along
    (the driver counts a cycle that started late as missed): over a minute's recording that is hundreds, which say
    nothing about what happened in the second of a stall."""
    windows: list[tuple[int, float]] = []
    for before, after in zip(entries, entries[1:], strict=False):
        try:
            count, seconds = int(after[MISSED_CYCLES_KEY]) - int(before[MISSED_CYCLES_KEY]), float(after["window_s"])
        except (KeyError, ValueError):
            return 0.0, None
        if seconds > 0:
            windows.append((count, seconds))
    if len(windows) < USUAL_MISSES_WINDOWS:
        return 0.0, None
    usual = float(np.median([count / seconds for count, seconds in windows]))
    beyond = [count - usual * seconds for count, seconds in windows]
    most = max(max(beyond), max(a + b for a, b in zip(beyond, beyond[1:], strict=False)))
    return usual, max(0, round(most))


def _why_the_bus_fails(virtual_arm: bool, load: str) -> str:
    if virtual_arm:  # its "servos" are a process on this machine: a reply it misses is the CPU, not a cable
        return f"the virtual arm's process answering late: it did not get the CPU in time ({load})"
    return "a servo not answering, a loose cable or the wrong baud rate"


def rate_cause(state_rate_hz: float, driver_rate_hz: float, bus: BusFigures | None,
               load_average: float | None, cores: int | None, virtual_arm: bool = False) -> str:
    """Why joint states came slower than the driver's configured rate, from what the driver measured: its bus
    failing (retries, timeouts), its bus round-trip (a cycle takes longer than the period), or the CPU (a
    cycle fits the period but the driver, or the chain after it, did not get to run)."""
    load = f"load average {load_average:.1f} on {cores} cores" if load_average is not None and cores else "load unknown"
    if bus is None:
        return f"the driver reported no bus figures ({load})"
    if bus.faults_per_s >= BUS_FAULTS_PER_S:
        return (f"the bus: {bus.faults_per_s:.1f} retries and timeouts per second ({_why_the_bus_fails(virtual_arm, load)}); "
                f"the driver cycled at {bus.achieved_hz:.0f} Hz")
    if bus.capacity_hz < RATE_WARN_FRACTION * driver_rate_hz:
        return (f"the bus round-trip: one read of the servos takes {1000.0 / max(bus.capacity_hz, 1e-9):.1f} ms, so the "
                f"driver can cycle at most {bus.capacity_hz:.0f} Hz of its {driver_rate_hz:g} Hz (achieved "
                f"{bus.achieved_hz:.0f} Hz; {load}): the USB-serial adapter's latency (an FTDI/CH340 latency timer "
                "of 16 ms: set it to 1 ms) or a slow link, not this machine")
    if bus.achieved_hz < RATE_WARN_FRACTION * driver_rate_hz:
        return (f"the CPU: a bus cycle takes {1000.0 / max(bus.capacity_hz, 1e-9):.1f} ms (room for {bus.capacity_hz:.0f} Hz) "
                f"but the driver ran at {bus.achieved_hz:.0f} Hz: its process did not get the CPU ({load})")
    return (f"the CPU: the driver cycled at {bus.achieved_hz:.0f} Hz but its joint states reached the recording at "
            f"{state_rate_hz:.0f} Hz: the processes after it did not get the CPU ({load})")


def stalled(gap: StateGap, driver_rate_hz: float) -> bool:
    """Whether no joint state came for :data:`STALL_PERIODS` of the driver's periods or more."""
    return gap.seconds * driver_rate_hz >= STALL_PERIODS


def stall_cause(gap: StateGap, driver_rate_hz: float, bus: BusFigures | None, load_average: float | None,
                cores: int | None, virtual_arm: bool = False) -> str:
    """What held joint states up for ``gap``: the driver sampling all along (the stamps around the gap), else what
    it counted over the recording: the driver not running its cycles (the servos then hold their last goals) for its
    bus or for its process, or its states not reaching the recording."""
    load = f"load average {load_average:.1f} on {cores} cores" if load_average is not None and cores else "load unknown"
    if gap.sampled_s is not None and gap.sampled_s < 0.5 * gap.seconds:
        return (f"the driver sampled the servos all along (the states around it {1000.0 * gap.sampled_s:.0f} ms apart "
                f"by their stamps): its joint states were held up after it (the processes after it or the machine, "
                f"{load})")
    if bus is None:
        return f"the driver reported no bus figures ({load})"
    missed = bus.missed_cycles if bus.stall_missed is None else bus.stall_missed
    usual = f" beyond its usual {bus.usual_missed_per_s:.0f} a second" if bus.stall_missed is not None and \
        bus.usual_missed_per_s >= 1.0 else ""
    if missed < 0.5 * gap.seconds * driver_rate_hz:
        return (f"the driver missed only {missed} cycles{usual}: its joint states did not reach the recording "
                f"(the processes after it; {load})")
    if bus.bus_faults:
        return (f"the driver missed {missed} cycles{usual} and its bus had {bus.bus_faults} retries and timeouts "
                f"({_why_the_bus_fails(virtual_arm, load)}): the servos held their last goals")
    return (f"the driver missed {missed} cycles{usual} with no bus retries or timeouts: its process did not run "
            f"(the CPU or the machine, {load}; or a subscriber joining its joint states: Fast DDS can hold a "
            f"publisher about 0.33 s then), and the servos held their last goals")


def physics_lagged(lag: LagHistogram) -> bool:
    """Whether a virtual arm's physics ran :data:`PHYSICS_LAG_WARN_MS` or more behind wall time for
    :data:`PHYSICS_LAG_WARN_FRACTION` of a recording or more (``lag``: over that recording)."""
    return lag.fraction_behind(PHYSICS_LAG_WARN_MS) >= PHYSICS_LAG_WARN_FRACTION


def physics_lag_warning(lag: LagHistogram, load_average: float | None, cores: int | None) -> str | None:
    """The warning for a recording on a virtual arm whose physics fell behind wall time (:func:`physics_lagged`);
    None when it kept up."""
    if not physics_lagged(lag):
        return None
    behind = lag.fraction_behind(PHYSICS_LAG_WARN_MS)
    load = f"load average {load_average:.1f} on {cores} cores" if load_average is not None and cores else "load unknown"
    return (f"WARNING: the virtual arm's physics ran {PHYSICS_LAG_WARN_MS:g} ms or more behind wall time for "
            f"{behind:.0%} of the recording (20 ms or more: {lag.fraction_behind(20.0):.0%}, 40 ms or more: "
            f"{lag.fraction_behind(40.0):.0%}): its servos answered with an arm that much older, which the recording "
            f"shows as lag on top of the arm's gap. This machine did not give the virtual arm's process the CPU "
            f"({load}); a physical arm does not lag")


def rate_line(message: str, state_rate_hz: float, driver_rate_hz: float, bus: BusFigures | None = None,
              load_average: float | None = None, cores: int | None = None, gap: StateGap | None = None,
              virtual_arm: bool = False, physics_lag: LagHistogram | None = None) -> str:
    """The recording's line: where it went and the chain's health, with a warning naming what limited the rate
    when joint states came late (:func:`rate_cause`), one naming what held them up when none came for
    :data:`STALL_PERIODS` of the driver's periods or more (:func:`stall_cause`) and one when the virtual arm's
    physics (``physics_lag``, over the recording) fell behind wall time (:func:`physics_lag_warning`)."""
    line = f"   recorded: {message}; joint states at {state_rate_hz:.0f} Hz (driver: {driver_rate_hz:g} Hz)"
    if state_rate_hz < RATE_WARN_FRACTION * driver_rate_hz:
        line += (f"\n   WARNING: joint states at {state_rate_hz / driver_rate_hz:.0%} of the driver's rate, limited by "
                 f"{rate_cause(state_rate_hz, driver_rate_hz, bus, load_average, cores, virtual_arm)}; the recording shows it "
                 "(late commands, lag) on top of the arm's gap")
    if gap is not None and stalled(gap, driver_rate_hz):
        line += (f"\n   WARNING: no joint state for {gap.seconds * 1000:.0f} ms from {gap.at_s:.1f} s: "
                 f"{stall_cause(gap, driver_rate_hz, bus, load_average, cores, virtual_arm)}; the recording shows it on top of "
                 "the arm's gap")
    lagged = physics_lag_warning(physics_lag, load_average, cores) if physics_lag is not None else None
    if lagged:
        line += "\n   " + lagged
    return line
