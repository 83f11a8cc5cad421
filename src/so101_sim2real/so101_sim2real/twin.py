"""The live gap twin (no rclpy): the MuJoCo replay run on the live command stream, beside the measured arm.

The offline gap (``so101 pair --sim mujoco``, the demo's reports) is "the real arm vs what MuJoCo does with the
policy's command": the replay starts at the measured pose at the first command, at rest, and holds each
command from its stamp (zero-order hold, 200 Hz physics; with a sim-delta model, ``a + Δ`` on the model's
control ticks). :class:`StreamingReplay` steps :class:`~so101_sim2real.replay.mujoco_backend.MujocoSim` by the
same rules one command at a time, so its states are the offline replay's; :class:`GapTwin` pairs each
measured joint state with the simulated state at the same stamp.

Time. Every input is stamped (header stamps, one ROS clock); the twin reads no clock of its own. A physics
step starting at ``t`` needs every command stamped ``<= t``; a stream arrives in order, so the sim steps up to
the latest command's stamp as each command arrives (the twin trails the arm by at most one command period).
While the command stream pauses, the measured states keep it going: a state stamped more than
``hold_after_s`` after the last command runs the sim to ``hold_after_s`` before it, holding the last command
(as the arm holds it). A command stamped before a control tick that already ran (late) is applied from the
next tick and counted. A pause longer than ``restart_after_s`` (a new episode, the arm moved by hand)
restarts the twin from the measured pose at the next command.

Gap: sim − measured (the offline metrics' sign), per joint, position (rad) and velocity (rad/s; NaN where the
arm reports none), at each measured stamp; rolling RMSE over the paired samples of the last ``window_s``
seconds, *warm* once the twin has run a whole window since it (re)started.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_common.trajectory import measured_at
from so101_sim2real.replay.mujoco_backend import MujocoSim
from so101_sim2real.sim_delta.filter import LiveSimDeltaFilter

__all__ = ["TwinConfig", "GapSample", "StreamingReplay", "RollingRmse", "GapTwin", "TwinError"]

_J = len(JOINT_NAMES)
_EPS = 1e-9  # s: stamps this close count as equal (the offline replay's zero-order hold uses the same)


class TwinError(ValueError):
    """A bad twin configuration or input."""


@dataclass(frozen=True)
class TwinConfig:
    window_s: float = 2.0  # s of paired samples in the rolling RMSE
    restart_after_s: float = 1.0  # s: a pause in the command stream longer than this restarts the twin
    hold_after_s: float = 0.25  # s: measured states this far past the last command run the sim on, holding it
    history_s: float = 1.0  # s of simulated samples kept to pair measured states that arrive late

    def __post_init__(self) -> None:
        for name in ("window_s", "restart_after_s", "hold_after_s", "history_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise TwinError(f"{name} must be > 0, got {value}")


@dataclass(frozen=True)
class GapSample:
    """The sim beside one measured joint state (vectors (J,) in :data:`JOINT_NAMES` order)."""

    stamp: float  # s: the measured state's stamp, the time of every value here
    sim_position: np.ndarray  # rad
    sim_velocity: np.ndarray  # rad/s
    sim_effort: np.ndarray  # N·m, the servo torque the sim applies
    position_gap: np.ndarray  # rad, sim − measured
    velocity_gap: np.ndarray  # rad/s, sim − measured (NaN where the arm reports no velocity)
    position_rmse: np.ndarray  # rad, rolling RMSE of position_gap
    velocity_rmse: np.ndarray  # rad/s, rolling RMSE of velocity_gap
    warm: bool  # the rolling window is full since the twin (re)started


class StreamingReplay:
    """:meth:`MujocoSim.simulate`'s stepping, one command at a time: the same zero-order hold on the commands'
    stamps, the same control ticks (``control_rate_hz``) and command filter, bit for bit the same states.

    Simulated samples (position, velocity, effort at each physics step) are kept for ``history_s`` and read
    back at any stamp by linear interpolation (:meth:`sample`)."""

    def __init__(self, sim: MujocoSim, delta: LiveSimDeltaFilter | None = None, history_s: float = 1.0) -> None:
        self.sim = sim
        self.delta = delta
        self.dt = sim.config.physics_dt
        self.decimation = sim.config.steps_per_control
        self._capacity = int(math.ceil(history_s / self.dt)) + 2
        self._rows = np.zeros((self._capacity, 3 * _J))
        self._pending: list[tuple[float, np.ndarray]] = []  # commands not applied yet, sorted by stamp
        self._held: np.ndarray = np.zeros(_J)  # the command held now (the start pose until the first one)
        self._target: np.ndarray = np.zeros(_J)  # the target of the current control tick (Δ included)
        self.start_time: float | None = None
        self.steps = 0  # physics steps run since the start
        self._last_tick = -math.inf  # s: the latest control tick run
        self.late = 0  # commands that came after the control tick that should have applied them

    @property
    def started(self) -> bool:
        return self.start_time is not None

    @property
    def next_time(self) -> float:
        """Start time of the next physics step (s)."""
        assert self.start_time is not None
        return self.start_time + self.steps * self.dt

    @property
    def last_sample_time(self) -> float | None:
        """Time of the latest simulated sample (s), None before the first step."""
        return None if self.start_time is None or not self.steps else self.start_time + (self.steps - 1) * self.dt

    def start(self, time: float, position: np.ndarray) -> None:
        """Put the sim at rest at ``position`` at ``time`` (the offline replay's start); forgets every command."""
        self.sim.reset(position, time=time)
        self.start_time = time
        self.steps = 0
        self._pending.clear()
        self._held = np.asarray(position, dtype=np.float64).copy()
        self._target = self._held
        self._last_tick = -math.inf
        if self.delta is not None:
            self.delta.restart()

    def command(self, stamp: float, position: np.ndarray) -> None:
        """Take a command, then run every physics step it cannot change (those starting before its stamp)."""
        if not self.started:
            raise TwinError("the replay has not started")
        if stamp <= self._last_tick + _EPS:
            self.late += 1
        bisect.insort(self._pending, (stamp, np.asarray(position, dtype=np.float64)), key=lambda item: item[0])
        while self.next_time + _EPS < stamp:
            self._step()

    def run_until(self, time: float) -> None:
        """Run every physics step starting at or before ``time``, holding the latest command."""
        while self.started and self.next_time <= time + _EPS:
            self._step()

    def _step(self) -> None:
        assert self.start_time is not None
        if self.steps % self.decimation == 0:  # a control tick: the latest command stamped <= its time
            tick = self.start_time + self.steps * self.dt
            while self._pending and self._pending[0][0] <= tick + _EPS:
                self._held = self._pending.pop(0)[1]
            self._target = self._held if self.delta is None else self.delta(
                tick, self._held.copy(), self.sim.position(), self.sim.velocity())
            self._last_tick = tick
        self._rows[self.steps % self._capacity] = self.sim.step_sample(self._target)
        self.steps += 1

    def sample(self, stamp: float) -> np.ndarray | None:
        """The simulated ``[position, velocity, effort]`` (3J,) at ``stamp``, linearly interpolated between
        physics steps; None when ``stamp`` is not simulated yet or no longer kept."""
        if self.start_time is None or not self.steps:
            return None
        x = (stamp - self.start_time) / self.dt
        k = math.floor(x + _EPS)
        if k < max(0, self.steps - self._capacity + 1) or k > self.steps - 1:
            return None
        frac = x - k
        row = self._rows[k % self._capacity]
        if k == self.steps - 1 or frac <= _EPS:
            return None if frac > _EPS else row.copy()
        return row + frac * (self._rows[(k + 1) % self._capacity] - row)


class RollingRmse:
    """Per-joint RMSE of the position and velocity gaps over the samples of the last ``window_s`` seconds
    (``(t − window_s, t]``); non-finite gaps (an unmeasured velocity) are left out of their joint's figure."""

    def __init__(self, window_s: float, joints: int = _J) -> None:
        self.window_s = window_s
        self._joints = joints
        self._samples: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self.reset()

    def reset(self) -> None:
        self._samples.clear()
        self._sum = np.zeros(2 * self._joints)
        self._count = np.zeros(2 * self._joints)

    def add(self, stamp: float, position_gap: np.ndarray, velocity_gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add one paired sample; returns (position RMSE, velocity RMSE) (J,) over the window ending at it."""
        gaps = np.concatenate([position_gap, velocity_gap])
        finite = np.isfinite(gaps)
        squares = np.where(finite, gaps, 0.0) ** 2
        self._samples.append((stamp, squares, finite))
        self._sum += squares
        self._count += finite
        while self._samples and self._samples[0][0] <= stamp - self.window_s:
            _, old, old_finite = self._samples.popleft()
            self._sum -= old
            self._count -= old_finite
        with np.errstate(invalid="ignore", divide="ignore"):
            rmse = np.where(self._count > 0, np.sqrt(np.maximum(self._sum, 0.0) / np.maximum(self._count, 1)), np.nan)
        return rmse[:self._joints], rmse[self._joints:]


class GapTwin:
    """The live twin: feed it the measured joint states and the commands (any order, each stream in order),
    read the :class:`GapSample` each call returns (the measured states the sim has reached)."""

    def __init__(self, sim: MujocoSim, config: TwinConfig | None = None,
                 delta: LiveSimDeltaFilter | None = None) -> None:
        self.config = config or TwinConfig()
        self.replay = StreamingReplay(sim, delta, self.config.history_s)
        self.rmse = RollingRmse(self.config.window_s)
        self._pending: deque[tuple[float, np.ndarray, np.ndarray]] = deque(maxlen=1024)  # measured, not paired yet
        self._recent: deque[tuple[float, np.ndarray]] = deque(maxlen=16)  # measured poses, for a start pose
        self._early: deque[tuple[float, np.ndarray]] = deque(maxlen=256)  # commands before the first measured state
        self._last_command: float | None = None
        self.starts = 0  # (re)starts from the measured pose
        self.unpaired = 0  # measured states that came after their simulated samples were dropped
        self.last: GapSample | None = None

    @property
    def started(self) -> bool:
        return self.replay.started

    def on_measured(self, stamp: float, position: np.ndarray, velocity: np.ndarray | None = None) -> list[GapSample]:
        """A measured joint state ((J,) rad, rad/s or None)."""
        position = np.asarray(position, dtype=np.float64)
        velocity = np.full(_J, np.nan) if velocity is None else np.asarray(velocity, dtype=np.float64)
        first = not self._recent
        self._recent.append((stamp, position))
        self._pending.append((stamp, position, velocity))
        out = []
        if first:  # commands that came before the arm's first state: the replay starts at the first of them
            early = [c for c in self._early if c[0] >= stamp - self.config.restart_after_s]
            self._early.clear()
            for command_stamp, command in early:
                out += self.on_command(command_stamp, command)
        elif self._last_command is not None and stamp - self.config.hold_after_s > self._last_command:
            self.replay.run_until(stamp - self.config.hold_after_s)  # the stream paused: hold its last command
        return out + self._pair()

    def on_command(self, stamp: float, position: np.ndarray) -> list[GapSample]:
        """A command of the stream the twin replays ((J,) rad)."""
        if not self._recent:
            self._early.append((stamp, np.asarray(position, dtype=np.float64)))
            return []
        last = self._last_command
        if (last is None or abs(stamp - last) > self.config.restart_after_s) and not self._start(stamp):
            return []  # a joint has not been measured yet (its servo did not answer): start at a later command
        self.replay.command(stamp, position)
        self._last_command = stamp if last is None else max(stamp, last)
        return self._pair()

    def restart(self) -> None:
        """Start again from the measured pose at the next command."""
        self._last_command = None

    def _start(self, stamp: float) -> bool:
        """Start the replay from the measured pose at ``stamp``, each joint from its finite readings (a joint
        whose servo did not answer reads NaN); False, not started, while a joint has none among the recent ones."""
        pose = measured_at(stamp, np.array([t for t, _ in self._recent]), np.array([p for _, p in self._recent]))
        if not np.isfinite(pose).all():
            return False
        self.replay.start(stamp, pose)
        self.rmse.reset()
        self.starts += 1
        self.last = None
        return True

    def _pair(self) -> list[GapSample]:
        replay = self.replay
        latest = replay.last_sample_time
        if latest is None or replay.start_time is None:
            return []
        start = replay.start_time
        out = []
        while self._pending and self._pending[0][0] <= latest + _EPS:
            stamp, position, velocity = self._pending.popleft()
            if stamp < start - _EPS:
                continue  # measured before the twin started
            row = replay.sample(stamp)
            if row is None:
                self.unpaired += 1
                continue
            position_gap = row[:_J] - position
            velocity_gap = row[_J:2 * _J] - velocity
            position_rmse, velocity_rmse = self.rmse.add(stamp, position_gap, velocity_gap)
            out.append(GapSample(stamp, row[:_J], row[_J:2 * _J], row[2 * _J:], position_gap, velocity_gap,
                                 position_rmse, velocity_rmse, stamp - start >= self.config.window_s - _EPS))
        if out:
            self.last = out[-1]
        return out
