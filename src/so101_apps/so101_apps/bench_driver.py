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

Under faults, with the node's settings (``rate_hz`` 100 on a fixed-rate clock that skips the ticks a
late cycle missed, as a ROS timer does; ``timeout_ms`` 20, ``retries`` 1), each beside the no-fault
rate measured in the same run:

``driver.rate_5pct_drops``: achieved cycle rate with 5 % of the replies dropped by the virtual bus's
fault injector (target ≥ 95 % of the configured rate). ``driver.rate_one_unplugged``: rate at which
the five healthy joints are read while servo 3 is unplugged (target ≥ 90 % of the configured rate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

from so101_common.bench import BenchResult, percentile
from so101_common.joints import JOINTS
from so101_driver.bus import FeetechBus
from so101_driver.driver_core import DriverConfig, DriverCore
from so101_feetech.calibration import MotorCalibration
from so101_feetech.control_table import Register

__all__ = ["benchmarks", "FEEDBACK_REGISTERS"]

TARGET_HZ = 500.0
CONFIGURED_HZ = 100.0  # the node's default rate_hz
NODE_TIMEOUT_MS, NODE_RETRIES = 20.0, 1  # the node's default timeout_ms and retries
FEEDBACK_REGISTERS = (
    Register.Present_Position, Register.Present_Velocity, Register.Present_Load, Register.Present_Voltage,
    Register.Present_Temperature, Register.Status, Register.Moving, Register.Present_Current,
)


def _virtual_arm(stack: ExitStack, faults: object = None) -> str:
    """Six configured servos on a realistic virtual bus (with ``faults``, a FaultInjector); returns the device path."""
    from so101_virtual.bus_server import BusServer, BusTiming
    from so101_virtual.pty_link import PtyLink
    from so101_virtual.servo_memory import ServoMemory

    servos = {}
    for j in JOINTS:
        memory = ServoMemory(j.servo_id, overrides={Register.Return_Delay_Time: 0})
        memory.set_encoder(2048)
        servos[j.servo_id] = memory
    link = stack.enter_context(PtyLink(BusServer(servos, faults, timing=BusTiming.realistic())))  # type: ignore[arg-type]
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


def _fixed_rate(step: Callable[[], bool], seconds: float, rate_hz: float) -> tuple[int, float]:
    """Call ``step`` on a ``rate_hz`` clock for ``seconds`` (ticks a late call overran are skipped, as a
    ROS timer skips them); (calls that returned True, seconds taken)."""
    period = 1.0 / rate_hz
    good = 0
    start = next_tick = time.perf_counter()
    while (now := time.perf_counter()) - start < seconds:
        if now < next_tick:
            time.sleep(next_tick - now)
        good += bool(step())
        next_tick += period
        late = time.perf_counter() - next_tick
        if late > 0:
            next_tick += math.ceil(late / period) * period
    return good, time.perf_counter() - start


def measure_faults(seconds: float = 3.0, rounds: int = 3) -> dict[str, float]:
    """Rates (Hz) at the configured 100 Hz: no fault, 5 % of replies dropped, servo 3 unplugged; the
    three take turns in ``rounds`` rounds, so a change of machine load affects them alike."""
    from so101_virtual.faults import FaultInjector

    faults = FaultInjector(seed=0)
    totals = {"none": [0, 0.0], "drops": [0, 0.0], "unplugged": [0, 0.0]}
    with ExitStack() as stack:
        device = _virtual_arm(stack, faults)
        bus = stack.enter_context(FeetechBus(device, timeout_ms=NODE_TIMEOUT_MS, retries=NODE_RETRIES))
        core = DriverCore(bus, _calibration(), config=DriverConfig(rate_hz=CONFIGURED_HZ))
        core.start()
        healthy = [k for k, j in enumerate(JOINTS) if j.servo_id != 3]

        def read(joints: list[int]) -> Callable[[], bool]:
            def step() -> bool:
                sample = core.cycle().sample
                return sample is not None and bool(sample.valid[joints].all())
            return step

        scenarios = (("none", faults.clear, read(list(range(len(JOINTS))))),
                     ("drops", lambda: faults.drop_fraction(0.05), lambda: core.cycle().sample is not None),
                     ("unplugged", lambda: faults.unplug(3), read(healthy)))
        for _ in range(rounds):
            for name, set_fault, step in scenarios:
                faults.clear()  # and settle: servo 3 back in the cycle after its probe, then the fault's steady state
                deadline = time.perf_counter() + 5.0
                while not read(list(range(len(JOINTS))))() and time.perf_counter() < deadline:
                    time.sleep(1.0 / CONFIGURED_HZ)
                set_fault()
                _fixed_rate(step, 0.2, CONFIGURED_HZ)
                good, taken = _fixed_rate(step, seconds / rounds, CONFIGURED_HZ)
                totals[name][0] += good
                totals[name][1] += taken
        core.stop()
    return {name: good / taken for name, (good, taken) in totals.items()}


def benchmarks(seconds: float = 2.0) -> Iterator[BenchResult]:
    rates = measure_faults(1.5 * seconds)
    yield BenchResult(
        name="driver.rate_5pct_drops", value=rates["drops"], unit="Hz", baseline=rates["none"],
        baseline_name=f"no faults, same bus and {CONFIGURED_HZ:g} Hz clock", better="higher",
        target=0.95 * CONFIGURED_HZ,
    )
    yield BenchResult(
        name="driver.rate_one_unplugged", value=rates["unplugged"], unit="Hz", baseline=rates["none"],
        baseline_name=f"no faults (all six joints read), same bus and {CONFIGURED_HZ:g} Hz clock", better="higher",
        target=0.9 * CONFIGURED_HZ,
    )
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
