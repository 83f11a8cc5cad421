"""The virtual SO-101: six STS3215 control tables, the MuJoCo arm, a real-time thread and the bus.

:class:`VirtualSO101` owns the six :class:`~so101_virtual.servo_memory.ServoMemory` objects, the
:class:`~so101_virtual.physics.ArmPhysics` that reads and writes them, a
:class:`~so101_virtual.bus_server.BusServer` with the profile's bus timing and a
:class:`~so101_virtual.faults.FaultInjector`; :meth:`VirtualSO101.open_pty` serves the bus on a
pseudo-terminal that ``scservo_sdk``/LeRobot/the driver open like the real USB adapter::

    with VirtualSO101("default") as robot:
        port = robot.open_pty("/tmp/so101_follower")
        ...  # FeetechBus(port) / LeRobot with robot.calibration()

Time: :meth:`start` runs the physics in a thread locked to wall time (``time_scale`` × real time);
without it (``realtime=False`` / never started) the owner advances it with :meth:`step` — exact and
deterministic, for tests.

Mechanics and calibration: each servo's encoder sits on its joint at an arbitrary horn angle
(:class:`~so101_virtual.physics.JointMechanics`, drawn from ``mechanics_seed``). :meth:`calibration`
is the LeRobot calibration those mechanics give (what ``so101 calibrate`` would measure): the
contract of ``docs/ARCHITECTURE.md`` (arm joints ``rad = s·(raw − mid)·2π/4095``, gripper linear on
``[range_min, range_max]``) maps Present_Position back to the true joint angle within a step. With
``calibrated=True`` (default) the servos' EEPROM already holds that calibration (Homing_Offset and
position limits), as an arm LeRobot has calibrated; ``calibrated=False`` is factory-fresh (offset 0,
limits 0..4095) for testing the calibration procedure. The shipped
``config/calibration/virtual_{follower,leader}.json`` are written by ``so101 virtual-bus
--write-calibration`` (``write_calibration_files``) from the default mechanics.

Roles: a ``follower`` powers up with torque off and waits for the host; a ``leader`` is a hand-moved
arm: torque off, a virtual hand (:meth:`ArmPhysics.set_hand`) moves it along ``motion`` (a function of
time, a :class:`~so101_common.trajectory.JointTrajectory`, a SAGE motion file, or by default
:func:`~so101_virtual.motion.builtin_motion`), back-driving the gearboxes like a person does.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from so101_common.joints import JOINT_NAMES, JOINTS, STEPS_PER_TURN
from so101_common.sage import read_motion_file
from so101_common.trajectory import JointTrajectory
from so101_feetech.calibration import MotorCalibration, save_calibration
from so101_feetech.control_table import Register, encode_register
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultInjector
from so101_virtual.lag import LagClock
from so101_virtual.motion import Motion, builtin_motion, trajectory_motion
from so101_virtual.physics import STEPS_PER_RAD, ArmPhysics, JointMechanics, PhysicsError
from so101_virtual.profiles import GapProfile, load_profile
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory

__all__ = ["VirtualSO101", "ROLES", "mechanics_for", "calibration_for", "store_calibration", "write_calibration_files"]

log = logging.getLogger(__name__)

ROLES = ("follower", "leader")
DEFAULT_MECHANICS_SEEDS: dict[str, int] = {"follower": 0, "leader": 1}  # two different arms
_MID = 2047  # LeRobot's half turn: homing offset = present − 2047 at the middle pose
_WRIST_ROLL = "wrist_roll"  # LeRobot calibrates it over the full turn 0..4095
_MARGIN = 16  # steps kept between a joint's encoder range and the 0/4095 wrap


def mechanics_for(seed: int | None, drive_modes: Sequence[int] | None = None) -> list[JointMechanics]:
    """Encoder mounting of the six servos: ``seed`` None puts every encoder at 2048 at joint zero,
    otherwise each horn angle is drawn (reproducibly) so the joint range never crosses the 0/4095 wrap.
    ``drive_modes`` (0/1 per joint) mounts servos reversed (LeRobot's drive_mode 1)."""
    modes = list(drive_modes) if drive_modes is not None else [0] * len(JOINTS)
    if len(modes) != len(JOINTS) or any(m not in (0, 1) for m in modes):
        raise ValueError(f"drive_modes must be {len(JOINTS)} values of 0 or 1, got {drive_modes}")
    rng = np.random.default_rng(seed)
    out = []
    for spec, mode in zip(JOINTS, modes, strict=True):
        half = max(abs(spec.lower), abs(spec.upper)) * STEPS_PER_RAD
        room = STEPS_PER_TURN / 2 - half - _MARGIN
        zero = 2048.0 if seed is None else 2048.0 + float(rng.integers(-int(room), int(room) + 1))
        out.append(JointMechanics(encoder_zero=zero, direction=-1 if mode else 1))
    return out


def calibration_for(mechanics: Sequence[JointMechanics]) -> dict[str, MotorCalibration]:
    """The LeRobot calibration that matches ``mechanics`` (see the module docstring)."""
    cals = {}
    for spec, mech in zip(JOINTS, mechanics, strict=True):
        s = mech.direction
        drive_mode = 0 if s > 0 else 1
        if spec.is_gripper:
            middle = (spec.lower + spec.upper) / 2
            homing = round(mech.actual(middle)) - _MID
            at_lower = mech.actual(spec.lower) - homing
            at_upper = mech.actual(spec.upper) - homing
            lo, hi = sorted((round(at_lower), round(at_upper)))
        elif spec.name == _WRIST_ROLL:
            homing = round(mech.encoder_zero - (0 + 4095) / 2)
            lo, hi = 0, 4095
        else:
            homing = round(mech.encoder_zero) - _MID
            half = round(max(abs(spec.lower), abs(spec.upper)) * STEPS_PER_RAD)
            lo, hi = _MID - half, _MID + half
        cals[spec.name] = MotorCalibration(id=spec.servo_id, drive_mode=drive_mode, homing_offset=homing,
                                           range_min=lo, range_max=hi)
    return cals


def store_calibration(memories: Sequence[ServoMemory], calibration: dict[str, MotorCalibration]) -> None:
    """Write ``calibration`` (in joint order) into the servos as LeRobot's calibration does: Homing_Offset and the
    position limits, written as the host does (Lock is 0 at power-up), so the EEPROM image keeps them."""
    for memory, cal in zip(memories, calibration.values(), strict=True):
        for register, value in ((Register.Homing_Offset, cal.homing_offset),
                                (Register.Min_Position_Limit, cal.range_min),
                                (Register.Max_Position_Limit, cal.range_max)):
            memory.write(register.address, encode_register(register, value))


class VirtualSO101:
    """A simulated SO-101 on a (pseudo-)serial bus. Context manager: :meth:`close` stops everything."""

    def __init__(
        self,
        profile: GapProfile | str | os.PathLike[str] = "default",
        role: str = "follower",
        *,
        calibrated: bool = True,
        mechanics_seed: int | None | str = "role",
        mechanics: Sequence[JointMechanics] | None = None,
        initial_positions: Sequence[float] | np.ndarray | None = None,
        motion: Motion | JointTrajectory | str | os.PathLike[str] | None = None,
        loop_motion: bool = True,
        time_scale: float = 1.0,
        bus_timing: BusTiming | None = None,
        faults: FaultInjector | None = None,
        mjcf: str | os.PathLike[str] | None = None,
    ) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        if not time_scale > 0.0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.profile = load_profile(profile)
        self.role = role
        self.time_scale = float(time_scale)
        if mechanics_seed == "role":
            mechanics_seed = DEFAULT_MECHANICS_SEEDS[role]
        elif isinstance(mechanics_seed, str):
            raise ValueError(f"mechanics_seed must be an integer, None or 'role', got {mechanics_seed!r}")
        self.mechanics = list(mechanics) if mechanics is not None else mechanics_for(mechanics_seed)
        self._calibration = calibration_for(self.mechanics)
        self.faults = faults if faults is not None else FaultInjector(seed=self.profile.seed)
        self.memories: list[ServoMemory] = [ServoMemory(spec.servo_id) for spec in JOINTS]
        if calibrated:
            store_calibration(self.memories, self._calibration)
        self.motion: Motion | None = None
        if role == "leader":
            self.motion = _as_motion(motion, loop_motion)
            if initial_positions is None:
                initial_positions = self.motion(0.0)
        elif motion is not None:
            raise ValueError("a motion is for the leader role (a follower is moved by its host)")
        if initial_positions is None:
            initial_positions = rest_pose()
        self.physics = ArmPhysics(self.profile, self.memories, self.mechanics, mjcf=mjcf,
                                  initial_positions=initial_positions, hand=role == "leader")
        for memory in self.memories:  # power-up: the goal is where the servo is
            memory.set(Register.Goal_Position, memory.get(Register.Present_Position))
        if self.motion is not None:
            self.physics.set_hand(self.motion(0.0))
        bus = self.profile.bus
        self.timing = bus_timing if bus_timing is not None else BusTiming(
            byte_time=bus.byte_time, return_delay=bus.return_delay, latency_s=bus.latency, jitter_s=bus.jitter,
            seed=self.profile.seed)
        self.server = BusServer({m.servo_id: m for m in self.memories}, self.faults, self.timing)
        self._links: list[PtyLink] = []
        self._lock = threading.RLock()  # one stepper at a time (thread or manual)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.overruns = 0  # real-time batches that could not keep up
        self.lag = LagClock()  # how far behind wall time the real-time thread found the physics, over time
        self.error: Exception | None = None  # why the physics thread stopped, if it did

    # ------------------------------------------------------------------------------- bus
    def open_pty(self, link: str | os.PathLike[str] | None = None) -> str:
        """Serve the bus on a new pseudo-terminal; returns the device path (``/dev/pts/N``) for
        ``scservo_sdk.PortHandler``. ``link`` also makes a symlink there pointing at it."""
        pty = PtyLink(self.server, os.fspath(link) if link is not None else None)
        self._links.append(pty)
        return pty.device_path

    @property
    def ptys(self) -> list[PtyLink]:
        return list(self._links)

    # ------------------------------------------------------------------------------- truth
    def true_positions(self) -> np.ndarray:
        """Joint angles in rad (ground truth), :data:`JOINT_NAMES` order."""
        with self._lock:
            return self.physics.true_positions()

    def true_velocities(self) -> np.ndarray:
        with self._lock:
            return self.physics.true_velocities()

    @property
    def sim_time(self) -> float:
        """Simulated seconds since construction."""
        return self.physics.time

    def calibration(self) -> dict[str, MotorCalibration]:
        """The LeRobot calibration of this arm's mechanics (``save_calibration`` writes its JSON)."""
        return dict(self._calibration)

    def memory(self, name_or_id: str | int) -> ServoMemory:
        """The control table of one servo, by joint name or (current) servo id."""
        if isinstance(name_or_id, str):
            return self.memories[JOINT_NAMES.index(name_or_id)]
        for memory in self.memories:
            if memory.servo_id == name_or_id:
                return memory
        raise KeyError(f"no servo with id {name_or_id}")

    # ------------------------------------------------------------------------------- time
    def step(self, duration: float) -> None:
        """Advance the simulation by ``duration`` simulated seconds now (manual stepping)."""
        if self._thread is not None:
            raise RuntimeError("the real-time thread is running; stop() it before stepping by hand")
        self._advance(duration)

    def _advance(self, duration: float) -> None:
        physics = self.physics
        with self._lock:
            if self.faults is not None:
                physics.voltage_sag = [self.faults.voltage_sag(m.servo_id) for m in self.memories]
                heat = self.faults.take_heat()
                if heat:
                    index = {m.servo_id: i for i, m in enumerate(self.memories)}
                    for servo_id, celsius in heat.items():
                        if servo_id in index:  # an id no servo has heats nothing
                            physics.set_temperature(index[servo_id], celsius)
            if self.motion is None:
                physics.step(duration)
                return
            ticks = max(0, round(duration / physics.tick))
            while ticks > 0:  # a leader: the hand follows its motion, updated every I/O batch
                n = min(physics.io_ticks, ticks)
                physics.set_hand(self.motion(physics.time))
                physics.step_ticks(n)
                ticks -= n

    def start(self, period_s: float = 0.002) -> VirtualSO101:
        """Run the physics in a background thread at ``time_scale`` × wall time, in batches of about
        ``period_s`` s (each batch's lag is accounted in :attr:`lag`)."""
        if not period_s > 0.0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, args=(period_s,), name="so101-physics", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the real-time thread (the state is kept; :meth:`step` works again)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self, period: float, max_lag: float = 0.1) -> None:
        """Keep simulated time at ``time_scale`` × wall time, in batches of about ``period`` s; a
        backlog above ``max_lag`` s (the machine could not keep up) is dropped and counted."""
        tick = self.physics.tick
        start_wall, start_sim = time.monotonic(), self.physics.time
        previous = start_wall
        while not self._stop.is_set():
            wake = time.monotonic()
            behind = start_sim + (wake - start_wall) * self.time_scale - self.physics.time
            self.lag.record(behind / self.time_scale, wake - previous)
            previous = wake
            if behind > max_lag * self.time_scale:
                self.overruns += 1
                log.debug("physics fell %.3f s behind wall time; skipping ahead", behind)
                start_wall, start_sim = wake, self.physics.time
                behind = 0.0
            ticks = math.floor(behind / tick + 1e-9)
            if ticks:
                try:
                    self._advance(ticks * tick)
                except PhysicsError as err:
                    self.error = err
                    log.error("%s; the physics thread stops (the bus keeps answering)", err)
                    return
            self._stop.wait(max(0.0, period - (time.monotonic() - wake)))

    # ------------------------------------------------------------------------------- life cycle
    def close(self) -> None:
        self.stop()
        for pty in self._links:
            pty.close()
        self._links.clear()

    def __enter__(self) -> VirtualSO101:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rest_pose() -> list[float]:
    """Where a powered-down follower lies: folded on its stops (shoulder_lift at its lower limit, elbow
    at its upper one, the wrist hanging), the gripper just open; torque-off equilibrium of the default arm."""
    return [0.0, JOINTS[1].lower + 0.005, JOINTS[2].upper - 0.01, 1.45, 0.0, 0.0]


def _as_motion(motion: Any, loop: bool) -> Motion:
    if motion is None:
        return builtin_motion()
    if isinstance(motion, (str, os.PathLike)):
        return trajectory_motion(read_motion_file(Path(motion)), loop=loop)
    if isinstance(motion, JointTrajectory):
        return trajectory_motion(motion, loop=loop)
    if callable(motion):
        return motion
    return trajectory_motion(motion, loop=loop)


def write_calibration_files(folder: str | os.PathLike[str]) -> list[Path]:
    """Write ``virtual_follower.json`` and ``virtual_leader.json`` (LeRobot format) for the default
    mechanics of each role of :class:`VirtualSO101` into ``folder``; returns the paths."""
    folder = Path(folder)
    return [save_calibration(folder / f"virtual_{role}.json", calibration_for(mechanics_for(DEFAULT_MECHANICS_SEEDS[role])))
            for role in ROLES]
