"""Driver benchmarks: the full cycle rate on the virtual bus with realistic 1 Mbaud timing.

They live in this package because the virtual bus depends on ``so101_driver`` (not the reverse).

``driver.cycle_rate``: :meth:`DriverCore.cycle` (one SYNC_WRITE of the six goals and one SYNC_READ
of the feedback block of six servos, sent in one port write; replies decoded to rad/rad·s⁻¹/N·m),
target ≥ 500 Hz. Baseline, same bus, same run: the same cycle done the naive way, one READ per
feedback register per servo (8 × 6 requests) and a SYNC_WRITE. ``driver.cycle_p99`` compares the 99th-percentile cycle times.

The virtual bus (``so101_virtual``: six servo control tables, no physics) runs in this process on a
pty with ``BusTiming.realistic()``: 10 bits per byte at 1 Mbaud both ways on a half-duplex line, each
servo's Return_Delay_Time (0 after LeRobot's configuration, as set here) and ~100 µs adapter latency
with jitter. The wire time alone of one cycle (SYNC_WRITE 26 bytes, SYNC_READ 14 bytes, six 21-byte
replies) is ~1.8 ms: ~560 Hz is the ceiling of any driver on this bus.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

from so101_common.bench import BenchResult, percentile
from so101_common.joints import JOINTS
from so101_driver.bus import FeetechBus
from so101_driver.calibration import MotorCalibration
from so101_driver.control_table import Register
from so101_driver.driver_core import DriverCore

__all__ = ["benchmarks", "FEEDBACK_REGISTERS"]

TARGET_HZ = 500.0
FEEDBACK_REGISTERS = (
    Register.Present_Position, Register.Present_Velocity, Register.Present_Load, Register.Present_Voltage,
    Register.Present_Temperature, Register.Status, Register.Moving, Register.Present_Current,
)


def _virtual_arm(stack: ExitStack) -> str:
    """Six configured servos on a realistic virtual bus; returns the device path."""
    from so101_virtual.bus_server import BusServer, BusTiming
    from so101_virtual.pty_link import PtyLink
    from so101_virtual.servo_memory import ServoMemory

    servos = {}
    for j in JOINTS:
        memory = ServoMemory(j.servo_id, overrides={Register.Return_Delay_Time: 0})
        memory.set_encoder(2048)
        servos[j.servo_id] = memory
    link = stack.enter_context(PtyLink(BusServer(servos, timing=BusTiming.realistic())))
    return link.device_path


def _calibration() -> dict[str, MotorCalibration]:
    return {j.name: MotorCalibration(j.servo_id, 0, 0, 1024, 3072) for j in JOINTS}


def _run_for(step: Callable[[], object], seconds: float) -> list[float]:
    """Call ``step`` repeatedly for about ``seconds``; the duration of each call."""
    samples = []
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        step()
        samples.append(time.perf_counter() - now)
    return samples


def measure(seconds: float = 2.0) -> tuple[list[float], list[float]]:
    """Cycle durations (s) of the driver cycle and of the per-register baseline."""
    with ExitStack() as stack:
        device = _virtual_arm(stack)
        bus = stack.enter_context(FeetechBus(device))
        core = DriverCore(bus, _calibration())
        core.start()
        ids = core.ids
        goals = dict.fromkeys(ids, 2048)

        def baseline() -> None:
            for servo_id in ids:
                for register in FEEDBACK_REGISTERS:
                    bus.read(register, servo_id, strict=False)
            bus.sync_write_goal_positions(goals)

        _run_for(core.cycle, 0.2)  # warm up
        driver = _run_for(core.cycle, seconds)
        base = _run_for(baseline, seconds / 2)
        core.stop()
    return driver, base


def benchmarks(seconds: float = 2.0) -> Iterator[BenchResult]:
    driver, base = measure(seconds)
    yield BenchResult(
        name="driver.cycle_rate", value=len(driver) / sum(driver), unit="Hz",
        baseline=len(base) / sum(base), baseline_name="one READ per feedback register per servo + SYNC_WRITE",
        better="higher", target=TARGET_HZ,
    )
    yield BenchResult(
        name="driver.cycle_p99", value=percentile(driver, 99) * 1e3, unit="ms",
        baseline=percentile(base, 99) * 1e3, baseline_name="one READ per feedback register per servo + SYNC_WRITE",
        better="lower",
    )


if __name__ == "__main__":
    for result in benchmarks():
        print(result.to_json())
