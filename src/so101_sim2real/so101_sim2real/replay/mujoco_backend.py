"""The built-in MuJoCo replay backend (no rclpy): the description's arm with position servos.

The model is the description's ``arm`` MJCF (no floor, so the gripper never touches one: SAGE's
replays showed the official scene's floor catching the jaw) with one position servo per joint added
programmatically through :class:`mujoco.MjSpec`, so the gains are configuration rather than a second
copy of the XML. Sensors (joint position, joint velocity, actuator force) are added the same way:
one sample of them is one consistent snapshot (state at ``t``, force applied from ``t``), which is
what :func:`mujoco.rollout.rollout` records per physics step in C.

Timing. Commands are a zero-order hold of the command stream on its own clock: the target applied
over a physics step starting at ``t`` is the last command stamped ``<= t``. With ``control_rate_hz``
set, the target only changes on control ticks (the servo sees a fresh target at that rate, as
SAGE's 50 Hz motions); with ``None`` every physics step takes the latest command. The first sample is
the initial state at the first command's time, so the replay is stamped on the command's clock.

Two faces: :class:`MujocoSim` (``reset``, ``step_command``, ``step_sample``, state) for the ROS bridge node
and the live twin (:mod:`so101_sim2real.twin`, the same replay one message at a time), and
:meth:`MujocoSim.simulate` / :func:`replay_trajectory` for fast in-process replays (open loop in one
``rollout`` call; with a per-step ``command_filter`` — the GapONet Δ — one ``rollout`` per control step).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mujoco
import mujoco.rollout
import numpy as np
from numpy.typing import ArrayLike

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.trajectory import JointTrajectory
from so101_description.paths import mjcf_path

__all__ = [
    "DEFAULT_KP",
    "DEFAULT_KD",
    "DEFAULT_FORCE_LIMIT",
    "MujocoSimError",
    "MujocoSimConfig",
    "MujocoSim",
    "build_model",
    "CommandFilter",
    "replay_trajectory",
    "RealTimePacer",
    "route_mujoco_warnings",
]

_LOG = logging.getLogger(__name__)

DEFAULT_KP = 998.22
"""N·m/rad: the official description's STS3215 position servo ("derived for servo P=16"); SAGE's
SO-101 sim uses kp 1000 in its repository (100 in its course material)."""
DEFAULT_KD = 2.731
"""N·m·s/rad: the official description's servo kv (SAGE's Isaac drives use other damping units)."""
DEFAULT_FORCE_LIMIT = 3.35
"""N·m: the official description's servo force range (about the STS3215's stall torque)."""

SAMPLE_MODES = ("physics", "control")
_OPEN_LOOP_CHUNK = 2000  # physics steps per rollout call without a filter (10 s at 200 Hz): progress granularity

# MuJoCo's warnings that mean the state blew up: MuJoCo then resets the data, and a replay would go on from the
# reset pose as if nothing happened (a frozen sim).
_INSTABILITY = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC)


def _log_mujoco_warning(message: str) -> None:
    _LOG.warning("MuJoCo: %s", message)


def route_mujoco_warnings() -> None:
    """Send MuJoCo's warnings to this module's logger (the console, the node's log) unless the application
    installed its own handler; MuJoCo's default handler writes them to ./MUJOCO_LOG.TXT, out of sight."""
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_log_mujoco_warning)


CommandFilter = Callable[[float, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""``(time, target, position, velocity) -> applied target``, called once per control step (all rad,
:data:`JOINT_NAMES` order); e.g. a GapONet Δ: ``target + Δ(history, target)``."""


class MujocoSimError(ValueError):
    """A bad configuration, command stream or state for the MuJoCo backend."""


def _per_joint(value: float | Sequence[float], what: str) -> tuple[float, ...]:
    values = (float(value),) * len(JOINTS) if isinstance(value, int | float) else tuple(float(v) for v in value)
    if len(values) != len(JOINTS):
        raise MujocoSimError(f"{what} needs one value or {len(JOINTS)} (one per joint), got {len(values)}")
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise MujocoSimError(f"{what} must be finite and >= 0, got {values}")
    return values


@dataclass(frozen=True)
class MujocoSimConfig:
    """Physics and servo settings of the MuJoCo backend (all SI; vectors in :data:`JOINT_NAMES` order)."""

    physics_dt: float = 0.005  # s per physics step: 200 Hz as SAGE's sim
    control_rate_hz: float | None = None  # Hz at which the applied target may change; None: every physics step
    kp: float | tuple[float, ...] = DEFAULT_KP  # N·m/rad position gain, one value or one per joint
    kd: float | tuple[float, ...] = DEFAULT_KD  # N·m·s/rad damping gain, one value or one per joint
    force_limit: float | tuple[float, ...] = DEFAULT_FORCE_LIMIT  # N·m servo torque limit, one or per joint
    start_position: tuple[float, ...] = (0.0,) * len(JOINTS)  # rad, pose after reset() without arguments
    gravity: bool = True  # False: gravity off (isolates servo tracking from sag)
    sample: str = "physics"  # simulate() output: every physics step, or every control tick

    def __post_init__(self) -> None:
        if not (math.isfinite(self.physics_dt) and 0 < self.physics_dt <= 0.05):
            raise MujocoSimError(f"physics_dt must be in (0, 0.05] s, got {self.physics_dt}")
        if self.control_rate_hz is not None:
            if not (math.isfinite(self.control_rate_hz) and self.control_rate_hz > 0):
                raise MujocoSimError(f"control_rate_hz must be > 0 or None, got {self.control_rate_hz}")
            if self.control_rate_hz * self.physics_dt > 1.0 + 1e-9:
                raise MujocoSimError(f"control rate {self.control_rate_hz} Hz is faster than physics "
                                     f"({1 / self.physics_dt:g} Hz)")
        object.__setattr__(self, "kp", _per_joint(self.kp, "kp"))
        object.__setattr__(self, "kd", _per_joint(self.kd, "kd"))
        object.__setattr__(self, "force_limit", _per_joint(self.force_limit, "force_limit"))
        start = tuple(float(v) for v in self.start_position)
        if len(start) != len(JOINTS) or not all(math.isfinite(v) for v in start):
            raise MujocoSimError(f"start_position needs {len(JOINTS)} finite values, got {self.start_position}")
        object.__setattr__(self, "start_position", start)
        if self.sample not in SAMPLE_MODES:
            raise MujocoSimError(f"sample must be one of {SAMPLE_MODES}, got {self.sample!r}")

    @property
    def kp_per_joint(self) -> tuple[float, ...]:
        return _per_joint(self.kp, "kp")

    @property
    def kd_per_joint(self) -> tuple[float, ...]:
        return _per_joint(self.kd, "kd")

    @property
    def force_limit_per_joint(self) -> tuple[float, ...]:
        return _per_joint(self.force_limit, "force_limit")

    @property
    def steps_per_control(self) -> int:
        """Physics steps per control tick (1 without a control rate)."""
        if self.control_rate_hz is None:
            return 1
        return max(1, round(1.0 / (self.control_rate_hz * self.physics_dt)))


def build_model(config: MujocoSimConfig) -> mujoco.MjModel:
    """The description's arm MJCF + position servos and joint/actuator sensors, compiled."""
    spec = mujoco.MjSpec.from_file(str(mjcf_path("arm")))
    spec.option.timestep = config.physics_dt
    if not config.gravity:
        spec.option.gravity = [0.0, 0.0, 0.0]
    for index, joint in enumerate(JOINTS):
        actuator = spec.add_actuator()
        actuator.name = joint.name
        actuator.target = joint.name
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.set_to_position(kp=config.kp_per_joint[index], kv=config.kd_per_joint[index])
        actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.ctrlrange = [joint.lower, joint.upper]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        limit = config.force_limit_per_joint[index]
        actuator.forcerange = [-limit, limit]
    for sensor_type, objtype in ((mujoco.mjtSensor.mjSENS_JOINTPOS, mujoco.mjtObj.mjOBJ_JOINT),
                                 (mujoco.mjtSensor.mjSENS_JOINTVEL, mujoco.mjtObj.mjOBJ_JOINT),
                                 (mujoco.mjtSensor.mjSENS_ACTUATORFRC, mujoco.mjtObj.mjOBJ_ACTUATOR)):
        for joint in JOINTS:
            sensor = spec.add_sensor()
            sensor.type = sensor_type
            sensor.objtype = objtype
            sensor.objname = joint.name
    try:
        return spec.compile()
    except ValueError as err:
        raise MujocoSimError(f"cannot compile the SO-101 MJCF with servos: {err}") from err


class MujocoSim:
    """One simulated SO-101: state, stepping, and fast replays. Not thread-safe."""

    def __init__(self, config: MujocoSimConfig | None = None) -> None:
        route_mujoco_warnings()
        self.config = config or MujocoSimConfig()
        self.model = build_model(self.config)
        self.data = mujoco.MjData(self.model)
        joints = len(JOINTS)
        self._qpos_index = np.array([self.model.jnt_qposadr[self.model.joint(n).id] for n in JOINT_NAMES])
        self._qvel_index = np.array([self.model.jnt_dofadr[self.model.joint(n).id] for n in JOINT_NAMES])
        self._actuator_index = np.array([self.model.actuator(n).id for n in JOINT_NAMES])
        self._lower = np.array([j.lower for j in JOINTS])
        self._upper = np.array([j.upper for j in JOINTS])
        self._state_spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self._ctrl_spec = mujoco.mjtState.mjSTATE_CTRL
        self._nstate = mujoco.mj_stateSize(self.model, self._state_spec)
        self._slices = (slice(0, joints), slice(joints, 2 * joints), slice(2 * joints, 3 * joints))
        self._rollout_data: mujoco.MjData | None = None
        self._index_by_name = {name: index for index, name in enumerate(JOINT_NAMES)}
        self.reset()

    # -- state ------------------------------------------------------------------------------------
    @property
    def time(self) -> float:
        """Simulation time, s since the last reset (plus its ``time`` argument)."""
        return float(self.data.time)

    def reset(self, positions: ArrayLike | None = None, velocities: ArrayLike | None = None,
              time: float = 0.0) -> None:
        """Put the arm at ``positions`` (default: the config's start pose) holding that target."""
        position = self._vector(self.config.start_position if positions is None else positions, "positions")
        velocity = self._vector(np.zeros(len(JOINTS)) if velocities is None else velocities, "velocities")
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._qpos_index] = position
        self.data.qvel[self._qvel_index] = velocity
        self.data.ctrl[self._actuator_index] = np.clip(position, self._lower, self._upper)
        self.data.time = time
        mujoco.mj_forward(self.model, self.data)

    def position(self) -> np.ndarray:
        return self.data.qpos[self._qpos_index].copy()

    def velocity(self) -> np.ndarray:
        return self.data.qvel[self._qvel_index].copy()

    def effort(self) -> np.ndarray:
        """Actuator force of the last step (N·m; joint transmission, gear 1)."""
        return self.data.actuator_force[self._actuator_index].copy()

    def step_command(self, positions: Sequence[float], steps: int = 1) -> None:
        """Hold ``positions`` (rad, clipped to the joint range) as the servo target for ``steps`` physics steps."""
        target = self._vector(positions, "positions")
        self.data.ctrl[self._actuator_index] = np.clip(target, self._lower, self._upper)
        self.step(steps)

    def set_targets(self, names: Sequence[str], positions: Sequence[float]) -> None:
        """Set the servo targets of the named joints (others keep theirs), clipped to the joint range.

        Like Isaac Sim's articulation controller, a command may name any subset of the joints."""
        if len(names) != len(positions):
            raise MujocoSimError(f"{len(names)} joint names but {len(positions)} positions")
        for name, value in zip(names, positions, strict=True):
            if name not in self._index_by_name:
                raise MujocoSimError(f"unknown joint {name!r}; expected some of {list(JOINT_NAMES)}")
            if not math.isfinite(value):
                raise MujocoSimError(f"target of {name} is not finite: {value}")
            index = self._index_by_name[name]
            self.data.ctrl[self._actuator_index[index]] = min(max(float(value), self._lower[index]), self._upper[index])

    def step(self, steps: int = 1) -> None:
        """Advance ``steps`` physics steps holding the current targets."""
        for _ in range(steps):
            mujoco.mj_step(self.model, self.data)

    def step_sample(self, target: np.ndarray) -> np.ndarray:
        """One physics step holding ``target`` ((J,) rad, clamped by the servos' control range as in
        :meth:`simulate`); returns the step's sample as :meth:`simulate` records it (3J values: position and
        velocity at the step's start, the servo torque applied over it), for replays stepped one at a time."""
        self.data.ctrl[self._actuator_index] = target
        mujoco.mj_step(self.model, self.data)
        return self.data.sensordata.copy()

    # -- fast replays -----------------------------------------------------------------------------
    def simulate(self, commands: JointTrajectory, initial_position: ArrayLike,
                 initial_velocity: ArrayLike | None = None, *,
                 command_filter: CommandFilter | None = None,
                 progress: Callable[[int, int], None] | None = None) -> JointTrajectory:
        """Replay ``commands`` from the given initial state; position/velocity/effort on the command's clock.

        Samples every physics step (``sample="physics"``) or every control tick, from the first
        command's time to the last one's; the returned effort is the servo torque applied from each sample.
        ``command_filter`` rewrites each control tick's target from the simulated state (closed loop);
        ``progress(done_steps, total_steps)`` is called after each rollout chunk.
        """
        commands = self._check_commands(commands)
        config = self.config
        dt, decimation = config.physics_dt, config.steps_per_control
        t0 = float(commands.time[0])
        steps = int(math.floor((commands.time[-1] - t0) / dt + 1e-9)) + 1
        step_time = t0 + np.arange(steps) * dt
        # zero-order hold: the target of step k is the last command at or before its control tick
        tick_time = step_time[(np.arange(steps) // decimation) * decimation]
        held = np.searchsorted(commands.time, tick_time + 1e-9, side="right") - 1
        self.reset(initial_position, initial_velocity, time=t0)
        ctrl = np.zeros((steps, self.model.nu))
        ctrl[:, self._actuator_index] = commands.position[held]
        # open loop: long rollouts in C; with a filter: one rollout per control tick (closed loop)
        chunk = decimation if command_filter is not None else max(decimation, _OPEN_LOOP_CHUNK)
        sensors = self._rollout(ctrl, step_time, chunk, command_filter, progress)
        keep = slice(None) if config.sample == "physics" else slice(None, None, decimation)
        position, velocity, effort = (sensors[keep, s] for s in self._slices)
        return JointTrajectory(step_time[keep], position, velocity, effort, JOINT_NAMES)

    def _rollout(self, ctrl: np.ndarray, step_time: np.ndarray, chunk: int, command_filter: CommandFilter | None,
                 progress: Callable[[int, int], None] | None) -> np.ndarray:
        """Run ``ctrl`` from the current state in rollouts of ``chunk`` steps; sensor rows per step."""
        steps = len(step_time)
        sensors = np.empty((steps, self.model.nsensordata))
        state = np.empty(self._nstate)
        mujoco.mj_getState(self.model, self.data, state, self._state_spec)
        if self._rollout_data is None:
            self._rollout_data = mujoco.MjData(self.model)
        warnings = self._rollout_data.warning
        seen = [warnings[kind].number for kind in _INSTABILITY]
        for start in range(0, steps, chunk):
            stop = min(start + chunk, steps)
            block = ctrl[start:stop]
            if command_filter is not None:
                target = block[0, self._actuator_index]
                applied = command_filter(float(step_time[start]), target.copy(), self.position(), self.velocity())
                block = block.copy()
                block[:, self._actuator_index] = self._vector(applied, "filtered command")
            states, block_sensors = mujoco.rollout.rollout(self.model, self._rollout_data, state, block[None],
                                                           control_spec=self._ctrl_spec)
            for kind, before in zip(_INSTABILITY, seen, strict=True):
                if warnings[kind].number > before:
                    dof = warnings[kind].lastinfo  # every joint of the arm is a hinge: one qpos, one dof
                    joint = self.model.joint(int(self.model.dof_jntid[dof])).name if 0 <= dof < self.model.nv else "?"
                    raise MujocoSimError(
                        f"MuJoCo: the simulation became unstable between t={step_time[start]:.3f} and "
                        f"{step_time[stop - 1]:.3f} s on {joint} ({mujoco.mju_warningText(kind, dof)}) and reset "
                        "itself: the commands or the initial state are not plausible for the arm")
            sensors[start:stop] = block_sensors[0]
            state = states[0, -1]
            mujoco.mj_setState(self.model, self.data, state, self._state_spec)
            if progress is not None:
                progress(stop, steps)
        return sensors

    # -- helpers ----------------------------------------------------------------------------------
    def _vector(self, values: ArrayLike, what: str) -> np.ndarray:
        vector = np.asarray(values, dtype=np.float64).reshape(-1)
        if vector.shape != (len(JOINTS),) or not np.isfinite(vector).all():
            raise MujocoSimError(f"{what} needs {len(JOINTS)} finite values ({list(JOINT_NAMES)}), got {values!r}")
        return vector

    def _check_commands(self, commands: JointTrajectory) -> JointTrajectory:
        if len(commands) == 0:
            raise MujocoSimError("the command stream is empty")
        try:
            commands = commands.reordered(JOINT_NAMES)
        except ValueError as err:
            raise MujocoSimError(f"command stream: {err}") from err
        if not np.isfinite(commands.position).all() or not np.isfinite(commands.time).all():
            raise MujocoSimError("the command stream holds NaN or infinite values")
        if len(commands) > 1 and not (np.diff(commands.time) > 0).all():
            raise MujocoSimError("command times must be strictly increasing")
        return commands


@dataclass
class RealTimePacer:
    """How many physics steps are due so simulation time keeps up with wall time × ``time_factor``."""

    physics_dt: float  # s per physics step
    time_factor: float = 1.0  # simulated seconds per wall second (> 1: faster than real time)
    max_catch_up: int = 40  # steps per call at most, so a stalled process does not freeze in a long burst

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_factor) and self.time_factor > 0):
            raise MujocoSimError(f"time_factor must be > 0, got {self.time_factor}")
        if self.max_catch_up < 1:
            raise MujocoSimError(f"max_catch_up must be >= 1, got {self.max_catch_up}")
        self._steps_done = 0

    def due(self, wall_elapsed: float) -> int:
        """Steps to run now, given wall seconds since the start; counts them as done."""
        wanted = math.floor(wall_elapsed * self.time_factor / self.physics_dt + 1e-9) - self._steps_done
        steps = max(0, min(wanted, self.max_catch_up))
        self._steps_done += steps
        return steps


def replay_trajectory(command: JointTrajectory, initial_position: np.ndarray,
                      config: MujocoSimConfig | None = None) -> JointTrajectory:
    """Replay ``command`` in a fresh :class:`MujocoSim` from rest at ``initial_position``; stamped on the command's clock."""
    return MujocoSim(config).simulate(command, initial_position)
