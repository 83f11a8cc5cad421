"""Shared fixtures of the driver tests: a LeRobot calibration and an in-memory fake bus."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from so101_driver.errors import BusTimeout, PortError
from so101_driver.feedback import BusCounters, Feedback
from so101_feetech.calibration import load_calibration

FIXTURE = Path(__file__).parent / "fixtures" / "so_follower_my_arm.json"


class FakeBus:
    """Servo positions follow goals instantly; faults are set per id."""

    def __init__(self, cals) -> None:
        self.port = "/dev/fake"
        self.is_connected = False
        self.positions = {c.id: (c.range_min + c.range_max) // 2 for c in cals.values()}
        self.unplugged: set[int] = set()
        self.status: dict[int, int] = {}
        self.port_broken = False
        self.writes: list[dict[int, int]] = []
        self.torque: dict[int, int] = dict.fromkeys(self.positions, 0)
        self.connects = 0
        self.configured: tuple | None = None
        self.counters = BusCounters()
        self.voltage: dict[int, int] = {}  # 0.1 V
        self.current: dict[int, int] = {}  # 6.5 mA
        self.connect_attempts: list[float] = []
        self.clock = None  # set to record the time of each connect attempt and of each read's request
        self.reads: list[list[int]] = []
        self.read_s = 0.0  # with a clock: how long a read takes from its request to its last reply
        self.asked_at: list[float] = []  # with a clock: when each read's request went out (the servos sample then)

    def connect(self):
        if self.clock is not None:
            self.connect_attempts.append(self.clock.t)
        if self.port_broken:
            raise PortError("cannot open /dev/fake: gone")
        self.is_connected = True
        self.connects += 1
        return self

    def close(self) -> None:
        self.is_connected = False

    def sync_read_feedback_partial(self, ids: Sequence[int], goals: Mapping[int, int] | None = None,
                                   retries: int | None = None, budget_s: float | None = None):
        if goals:  # written just before the read, in the same transfer
            self.sync_write_goal_positions(goals)
        if self.port_broken:
            raise PortError("write failed: device disconnected")
        self.reads.append(list(ids))
        self.counters.transactions += 1
        if self.clock is not None:
            self.asked_at.append(self.clock.t)
            self.clock.t += self.read_s
        fb, failures = {}, {}
        for i in ids:
            if i in self.unplugged:
                failures[i] = BusTimeout(i, 3, "sync read of the feedback block")
                self.counters.timeouts += 1
            else:
                fb[i] = Feedback(self.positions[i], 10, -200, self.voltage.get(i, 121), 30, self.status.get(i, 0), False,
                                 self.current.get(i, 12))
        return fb, failures

    def sync_write_goal_positions(self, goals: Mapping[int, int]) -> None:
        if self.port_broken:
            raise PortError("write failed: device disconnected")
        self.writes.append(dict(goals))
        for i, g in goals.items():
            if i not in self.unplugged:
                self.positions[i] = g

    def set_torque(self, ids: Iterable[int], enabled: bool) -> None:
        for i in ids:
            if i in self.unplugged:
                raise BusTimeout(i, 3, "write Torque_Enable")
            self.torque[i] = int(enabled)

    def configure_lerobot(self, ids, gripper_id=None) -> dict[int, list[str]]:
        self.configured = (list(ids), gripper_id)
        return {ids[0]: ["Acceleration"]}

    def patient(self):  # no deadlines here: every transaction answers at once
        return contextlib.nullcontext()


class TickClock:
    """Advances 1 ms at every reading."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


@pytest.fixture
def cals():
    return load_calibration(FIXTURE)


@pytest.fixture
def bus(cals):
    return FakeBus(cals)


@pytest.fixture
def tick_clock():
    return TickClock()
