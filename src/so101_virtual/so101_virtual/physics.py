"""The virtual SO-101's body: MuJoCo arm, gearboxes with backlash, friction, and six servo firmwares.

:class:`ArmPhysics` builds the arm from the description's MJCF (``so101_description.paths.mjcf_path()``;
joint names from the joint spec) and drives every joint the way an STS3215 does:

* **Motor side and gearbox.** Where the profile gives a joint backlash, a rotor body is added on the
  joint's axis (same parent, same frame) with its own hinge; the rotor carries the armature, the
  gearbox's Coulomb friction (MuJoCo ``frictionloss``: a constraint, so there is true stiction) and
  viscous friction. It is coupled to the link by a fixed tendon ``q_link − q_rotor`` limited to
  ``±backlash/2``: inside that dead band the link swings free (only its bearing's ``output_friction``
  acts), at either end the gear teeth engage through a limit constraint whose softness gives
  ``gear_stiffness``. Constraints are solved implicitly, so this stays stable at a 1 ms step whatever
  the inertia and stiffness. A joint without backlash is driven directly (armature and friction on
  the link joint): the ideal profile is exactly the rigid MuJoCo arm.
* **Motor torque.** Each firmware pass (:mod:`so101_virtual.firmware`) yields a drive torque, applied
  to the rotor (``qfrc_applied``), and the back-EMF damping of an active bridge, set as the rotor
  joint's ``dof_damping`` (integrated implicitly by ``implicitfast``).
* **Sensors.** The magnetic encoder sits on the output shaft: it reads the *link* angle,
  ``actual = encoder_zero + direction·θ·4096/2π`` (+ noise), quantised to whole steps and wrapped to
  0..4095; ``Present_Position = actual − Homing_Offset`` (ServoMemory applies the offset).
  ``Present_Velocity`` is the encoder change over ``velocity_window`` (20 ms: 50 step/s resolution, as
  the real servo's 0.077 rad/s); ``Present_Load`` the PWM output; ``Present_Current`` the motor current
  ``|duty·V − Ke·ω|/R`` in 6.5 mA; ``Present_Voltage`` the supply minus its resistance drop and any
  injected sag; ``Present_Temperature`` the winding model.

:meth:`ArmPhysics.step` advances by whole firmware periods; the settings are read from the servo
memories at the start of each I/O batch (``io_period``) where a write changed them, and feedback posted at its end
(encoded into the table when the host reads it), which keeps the Python work per millisecond small enough for a
real-time thread on a loaded 2-core machine.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from so101_common.joints import JOINT_NAMES, STEPS_PER_TURN
from so101_feetech.control_table import Register
from so101_virtual.firmware import (
    CURRENT_LSB,
    FirmwareInputs,
    FirmwareOutput,
    ServoModel,
    ServoSettings,
    initial_state,
    settings_from_table,
)
from so101_virtual.firmware import step as firmware_step
from so101_virtual.profiles import GapProfile, load_profile
from so101_virtual.servo_memory import ServoMemory

__all__ = ["JointMechanics", "ArmPhysics", "PhysicsError", "default_mjcf_path", "STEPS_PER_RAD"]

STEPS_PER_RAD = STEPS_PER_TURN / (2 * math.pi)
FRICTION_TIMECONST_STEPS = 2.0
_MAX_SPEED = 1000.0  # rad/s: beyond this a joint is numerically exploding, not moving
_BAD_QACC = int(mujoco.mjtWarning.mjWARN_BADQACC)
FRICTION_SOLIMP = (0.999, 0.9999, 0.001, 0.5, 2.0)
_HOMING = Register.Homing_Offset
# Settings live below Present_Position: one read of addresses 0..55 covers them.
_SETTINGS_SPAN = Register.Present_Position.address


class PhysicsError(RuntimeError):
    """The simulation became unstable (a profile with gains far too high for its inertia and loop rate)."""


def default_mjcf_path() -> Path:
    """The arm-only MJCF of ``so101_description``."""
    from so101_description.paths import mjcf_path

    return mjcf_path()


@dataclass(frozen=True)
class JointMechanics:
    """How one servo's encoder is mounted relative to the joint angle."""

    encoder_zero: float = 2048.0  # encoder reading (before Homing_Offset) at joint angle 0, steps
    direction: int = 1  # +1: the encoder counts up with the joint angle; −1: mounted reversed

    def __post_init__(self) -> None:
        if self.direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1, got {self.direction}")

    def actual(self, angle: float) -> float:
        """The (unquantised, unwrapped) encoder reading at ``angle`` rad."""
        return self.encoder_zero + self.direction * angle * STEPS_PER_RAD


class _NormalDraws:
    """Standard normal draws of one generator, taken from it a block at a time: the same numbers in the
    same order as one call each (numpy's scalar ``normal(0, s)`` is ``s`` × this draw), at a fraction of
    the cost of a generator call per servo and firmware pass."""

    _BLOCK = 4096

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._block: list[float] = []
        self._next = 0

    def next(self) -> float:
        if self._next == len(self._block):
            self._block, self._next = self._rng.standard_normal(self._BLOCK).tolist(), 0
        self._next += 1
        return self._block[self._next - 1]


class ArmPhysics:
    """The SO-101 in MuJoCo with six simulated STS3215s reading and writing ``servos`` (ServoMemory).

    ``servos`` are in :data:`JOINT_NAMES` order. ``hand=True`` adds a "hand" on every link joint (a
    position actuator with ``hand_stiffness``/``hand_damping``), used to move a torque-off leader arm
    the way a person does; :meth:`set_hand` gives its targets.
    """

    def __init__(
        self,
        profile: GapProfile | str,
        servos: Sequence[ServoMemory],
        mechanics: Sequence[JointMechanics] | None = None,
        *,
        mjcf: str | os.PathLike[str] | None = None,
        initial_positions: Sequence[float] | np.ndarray | None = None,
        hand: bool = False,
        hand_stiffness: float = 20.0,
        hand_damping: float = 1.0,
        io_period: float = 0.001,
    ) -> None:
        self.profile = load_profile(profile)
        if len(servos) != len(JOINT_NAMES):
            raise ValueError(f"expected {len(JOINT_NAMES)} servo memories (one per joint), got {len(servos)}")
        self.servos = list(servos)
        self.mechanics = list(mechanics) if mechanics is not None else [JointMechanics() for _ in JOINT_NAMES]
        if len(self.mechanics) != len(JOINT_NAMES):
            raise ValueError(f"expected {len(JOINT_NAMES)} joint mechanics, got {len(self.mechanics)}")
        self.dt = self.profile.physics.timestep
        self.steps_per_tick = self.profile.steps_per_tick
        self.tick = self.dt * self.steps_per_tick  # firmware period
        self.io_ticks = max(1, round(io_period / self.tick))
        self._hand_enabled = hand
        self._hand_gains = (hand_stiffness, hand_damping)
        self._build(mjcf or default_mjcf_path(), hand, hand_stiffness, hand_damping)
        self._normal = _NormalDraws(np.random.default_rng(self.profile.seed))
        p = self.profile
        self._models = [ServoModel.from_profile(j, p.firmware, p.physics.ambient_temperature) for j in p.joint_params]
        self._noise = [j.position_noise for j in p.joint_params]
        self._current_noise = [j.current_noise for j in p.joint_params]
        self._viscous = np.array([j.viscous_friction for j in p.joint_params])
        self._window_ticks = max(1, round(p.firmware.velocity_window / self.tick))
        self._d_ticks = max(1, round(p.firmware.derivative_window / self.tick))
        self._resolution = [j.encoder_resolution for j in p.joint_params]
        self._external = np.zeros(self.model.nv)  # generalized forces applied besides the motors
        self.voltage_sag: Sequence[float] = [0.0] * len(JOINT_NAMES)  # V per servo, injected sag (faults)
        self.time = 0.0  # simulated seconds
        self._settings: list[ServoSettings] = [ServoSettings() for _ in JOINT_NAMES]
        self._tables: list[bytes] = [b""] * len(JOINT_NAMES)
        self._versions = [-1] * len(JOINT_NAMES)  # each servo's settings_version when its settings were last read
        self._homing_offsets = [0] * len(JOINT_NAMES)
        self.set_positions(initial_positions if initial_positions is not None else [0.0] * len(JOINT_NAMES))

    # ------------------------------------------------------------------------------------ building
    def _build(self, mjcf: str | os.PathLike[str], hand: bool, kp: float, kv: float) -> None:
        p = self.profile
        spec = mujoco.MjSpec.from_file(os.fspath(mjcf))
        for actuator in list(spec.actuators):
            spec.delete(actuator)
        for geom in list(spec.geoms):  # visual meshes: not needed for physics, slow to compile
            if geom.type == mujoco.mjtGeom.mjGEOM_MESH and geom.contype == 0 and geom.conaffinity == 0:
                spec.delete(geom)
        for mesh in list(spec.meshes):
            spec.delete(mesh)
        spec.option.timestep = p.physics.timestep
        spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
        spec.option.gravity = [0.0, 0.0, -9.81 * p.physics.gravity_scale]
        if not p.physics.contacts:
            spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
        self._rotor_names: list[str | None] = []
        for name, params in zip(JOINT_NAMES, p.joint_params, strict=True):
            joint = spec.joint(name)
            if joint is None:
                raise ValueError(f"{mjcf}: no joint named {name!r}")
            link = joint.parent
            if params.backlash > 0.0:
                joint.armature = 1e-5
                joint.damping = [0.0, 0.0, 0.0]
                joint.frictionloss = params.output_friction
                self._stiff_friction(joint)
                rotor = link.parent.add_body(name=f"{name}_rotor", pos=link.pos, quat=link.quat,
                                             mass=1e-4, inertia=[1e-8, 1e-8, 1e-8])
                rjoint = rotor.add_joint(name=f"{name}_rotor", type=mujoco.mjtJoint.mjJNT_HINGE, axis=joint.axis,
                                         pos=joint.pos, armature=params.armature, damping=[params.viscous_friction, 0.0, 0.0],
                                         frictionloss=params.coulomb_friction)
                rjoint.limited = mujoco.mjtLimited.mjLIMITED_FALSE
                self._stiff_friction(rjoint)
                tendon = spec.add_tendon(name=f"{name}_gear", limited=mujoco.mjtLimited.mjLIMITED_TRUE,
                                         range=[-params.backlash / 2, params.backlash / 2])
                tendon.wrap_joint(name, 1.0)
                tendon.wrap_joint(f"{name}_rotor", -1.0)
                # Gear mesh as a critically damped limit spring: time constant from stiffness and the
                # smaller (rotor) inertia, never below two steps (MuJoCo's stability floor).
                timeconst = max(math.sqrt(params.armature / params.gear_stiffness), 2.0 * p.physics.timestep)
                tendon.solref_limit = [timeconst, 1.0]
                tendon.solimp_limit = [0.95, 0.99, 0.0005, 0.5, 2.0]
                self._rotor_names.append(f"{name}_rotor")
            else:
                joint.armature = params.armature
                joint.damping = [params.viscous_friction, 0.0, 0.0]
                joint.frictionloss = params.coulomb_friction + params.output_friction
                self._stiff_friction(joint)
                self._rotor_names.append(None)
        if p.physics.payload_mass > 0.0:
            site = spec.site("gripper_frame")
            holder = site.parent if site is not None else spec.joint("wrist_roll").parent
            pos = np.asarray(site.pos if site is not None else [0.0, 0.0, 0.0], dtype=float)
            if site is not None:
                rot = np.zeros(9)
                mujoco.mju_quat2Mat(rot, np.asarray(site.quat, dtype=float))
                pos = pos + rot.reshape(3, 3) @ np.asarray(p.physics.payload_offset)
            r = 0.01  # a 1 cm sphere's inertia
            inertia = 0.4 * p.physics.payload_mass * r * r
            holder.add_body(name="payload", pos=pos, mass=p.physics.payload_mass, inertia=[inertia] * 3)
        if hand:
            for name in JOINT_NAMES:
                act = spec.add_actuator(name=f"hand_{name}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                act.set_to_position(kp=kp, kv=kv)
                act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
                act.forcerange = [-10.0, 10.0]
        self.model = spec.compile()
        self.data = mujoco.MjData(self.model)
        self._warnings = self.data.warning  # (each access of the attribute builds a new view)
        if hand:  # the hand starts off the arm
            self.model.actuator_gainprm[:, 0] = 0.0
            self.model.actuator_biasprm[:, 1:3] = 0.0
        m = self.model
        self._link_q = np.array([m.jnt_qposadr[m.joint(n).id] for n in JOINT_NAMES])
        self._link_v = np.array([m.jnt_dofadr[m.joint(n).id] for n in JOINT_NAMES])
        self._drive_v = np.array([m.jnt_dofadr[m.joint(r or n).id] for n, r in zip(JOINT_NAMES, self._rotor_names,
                                                                                 strict=True)])
        self._rotor_q = [m.jnt_qposadr[m.joint(r).id] if r else None for r in self._rotor_names]
        self._drive_list = self._drive_v.tolist()

    def _stiff_friction(self, joint: mujoco.MjsJoint) -> None:
        """Dry friction as a hard constraint: MuJoCo's default softness lets a joint creep under a
        torque below its friction; this keeps the creep to micro-radians per second."""
        joint.solref_friction = [FRICTION_TIMECONST_STEPS * self.profile.physics.timestep, 1.0]
        joint.solimp_friction = list(FRICTION_SOLIMP)

    # ------------------------------------------------------------------------------------ state
    def set_positions(self, positions: Sequence[float] | np.ndarray) -> None:
        """Place every joint (link and rotor) at ``positions`` rad, at rest; resets the firmware loops."""
        q = np.asarray(positions, dtype=float)
        if q.shape != (len(JOINT_NAMES),):
            raise ValueError(f"expected {len(JOINT_NAMES)} positions, got shape {q.shape}")
        d = self.data
        d.qvel[:] = 0.0
        d.qacc[:] = 0.0
        d.qpos[self._link_q] = q
        for rq, value in zip(self._rotor_q, q, strict=True):
            if rq is not None:
                d.qpos[rq] = value
        mujoco.mj_forward(self.model, d)
        exact = self._encoder_exact(noise=False)
        raw = [math.floor(x + 0.5) for x in exact]
        seen = [self._resolve(i, x) for i, x in enumerate(exact)]
        # Present_Velocity history (whole steps) and the firmware's D-term history (what it resolves)
        self._history = [deque([r] * (self._window_ticks + 1), maxlen=self._window_ticks + 1) for r in raw]
        self._seen = [deque([x] * (self._d_ticks + 1), maxlen=self._d_ticks + 1) for x in seen]
        self._current = [0.0] * len(JOINT_NAMES)
        self._update_volts(0.0)
        self._refresh_settings(force=True)
        self._fw = [initial_state(self._present(i, x), m) for i, (x, m) in enumerate(zip(seen, self._models,
                                                                                           strict=True))]
        self._out: list[FirmwareOutput] = [FirmwareOutput(0.0, 0.0, 0.0, 0, False, False) for _ in JOINT_NAMES]
        self._post_feedback()

    def true_positions(self) -> np.ndarray:
        """Link joint angles, rad (ground truth), in :data:`JOINT_NAMES` order."""
        return self.data.qpos[self._link_q].copy()

    def true_velocities(self) -> np.ndarray:
        """Link joint velocities, rad/s."""
        return self.data.qvel[self._link_v].copy()

    def rotor_positions(self) -> np.ndarray:
        """Motor-side (gearbox input) angles at the output scale, rad; equal to the link angle without backlash."""
        q = self.data.qpos
        return np.array([q[rq] if rq is not None else q[lq] for rq, lq in zip(self._rotor_q, self._link_q,
                                                                              strict=True)])

    def motor_currents(self) -> np.ndarray:
        """Motor current magnitudes, A (last firmware pass)."""
        return np.array(self._current)

    def temperatures(self) -> np.ndarray:
        """Winding temperatures, °C."""
        return np.array([s.temperature for s in self._fw])

    def set_temperature(self, index: int, celsius: float) -> None:
        """Put servo ``index``'s winding at ``celsius`` (it cools or heats from there by its thermal model)."""
        self._fw[index] = self._fw[index]._replace(temperature=float(celsius))

    def voltages(self) -> np.ndarray:
        """Supply voltage at each servo now, V."""
        return np.array(self._volts)

    @property
    def external_torque(self) -> np.ndarray:
        """Torques (N·m) applied to the link joints besides the motors: a hand, a disturbance, a test."""
        return self._external[self._link_v].copy()

    @external_torque.setter
    def external_torque(self, torques: Sequence[float]) -> None:
        self._external[:] = 0.0
        self._external[self._link_v] = np.asarray(torques, dtype=float)

    def set_hand(self, targets: Sequence[float] | np.ndarray | None) -> None:
        """Hand targets (rad per joint) for an arm built with ``hand=True``; ``None`` lets go."""
        if not self._hand_enabled:
            raise RuntimeError("this ArmPhysics was built without a hand (hand=True)")
        m = self.model
        if targets is None:
            m.actuator_gainprm[:, 0] = 0.0
            m.actuator_biasprm[:, 1:3] = 0.0
            return
        self.data.ctrl[:] = np.asarray(targets, dtype=float)
        kp, kv = self._hand_gains
        m.actuator_gainprm[:, 0] = kp
        m.actuator_biasprm[:, 1] = -kp
        m.actuator_biasprm[:, 2] = -kv

    # ------------------------------------------------------------------------------------ stepping
    def step(self, duration: float) -> int:
        """Advance by ``duration`` s (rounded to whole firmware periods); returns the passes run."""
        ticks = max(0, round(duration / self.tick))
        self.step_ticks(ticks)
        return ticks

    def step_ticks(self, ticks: int) -> None:
        """Advance by ``ticks`` firmware periods, in I/O batches."""
        done = 0
        while done < ticks:
            n = min(self.io_ticks, ticks - done)
            self._refresh_settings()
            for _ in range(n):
                self._tick()
            self._check_stable()
            self._post_feedback()
            done += n

    def _check_stable(self) -> None:
        bad = self._warnings[_BAD_QACC].number
        if bad or not np.abs(self.data.qvel).max() < _MAX_SPEED:  # (a NaN compares False: unstable too)
            raise PhysicsError(
                f"the simulation of profile {self.profile.name!r} became unstable at t = {self.time:.3f} s "
                "(servo gains too high for the rotor inertia, loop rate and time step: raise armature or "
                "loop_rate, lower p_gain/d_gain or timestep)")

    def _refresh_settings(self, force: bool = False) -> None:
        for i, servo in enumerate(self.servos):
            version = servo.settings_version  # before the read: a write after it is seen at the next refresh
            if not force and version == self._versions[i]:
                continue
            self._versions[i] = version
            table = servo.read(0, _SETTINGS_SPAN)
            if force or table != self._tables[i]:
                self._tables[i] = table
                self._settings[i] = settings_from_table(table)
                self._homing_offsets[i] = self._decode_homing(table)

    @staticmethod
    def _decode_homing(table: bytes) -> int:
        raw = table[_HOMING.address] | (table[_HOMING.address + 1] << 8)
        magnitude = raw & 0x7FF
        return -magnitude if raw & 0x800 else magnitude

    def _encoder_exact(self, noise: bool = True) -> list[float]:
        """Unquantised, unwrapped encoder readings (steps) of the link angles, with noise."""
        q = self.data.qpos[self._link_q].tolist()
        out = []
        for i, (angle, mech) in enumerate(zip(q, self.mechanics, strict=True)):
            value = mech.actual(angle)
            if noise and self._noise[i] > 0.0:
                value += self._noise[i] * self._normal.next()
            out.append(value)
        return out

    def _resolve(self, i: int, exact: float) -> float:
        """The reading as the firmware loop resolves it (``encoder_resolution``; 0 = exact)."""
        res = self._resolution[i]
        return math.floor(exact / res + 0.5) * res if res > 0.0 else exact

    def _present(self, i: int, actual: float) -> float:
        return (actual - self._homing_offsets[i]) % STEPS_PER_TURN

    def _tick(self) -> None:
        """One firmware pass of every servo, then the physics steps of one firmware period."""
        d = self.data
        exact = self._encoder_exact()
        d_window = self._d_ticks * self.tick
        drive_v = self._drive_list
        volts = self._volts
        applied = d.qfrc_applied
        applied[:] = self._external
        damping = self.model.dof_damping
        for i, x in enumerate(exact):
            self._history[i].append(math.floor(x + 0.5))
            seen = self._resolve(i, x)
            hist = self._seen[i]
            hist.append(seen)
            direction = self.mechanics[i].direction
            velocity = direction * (seen - hist[0]) / d_window  # step/s in the servo's frame
            inputs = FirmwareInputs(self._present(i, seen), velocity, self._current[i], volts[i])
            out, self._fw[i] = firmware_step(self._settings[i], self._fw[i], inputs, self._models[i], self.tick)
            self._out[i] = out
            dof = drive_v[i]
            applied[dof] += direction * out.drive_torque
            damping[dof] = self._viscous[i] + out.damping
        mujoco.mj_step(self.model, d, nstep=self.steps_per_tick)
        self.time += self.tick
        # motor currents after the step: |duty·V − Ke·ω| / R through an active bridge
        qvel = d.qvel
        total = 0.0
        for i, model in enumerate(self._models):
            out = self._out[i]
            if out.damping > 0.0:
                omega = self.mechanics[i].direction * qvel[drive_v[i]]
                current = abs(out.pwm / 1000.0 * volts[i] - model.back_emf * omega) / model.resistance
            else:
                current = 0.0
            self._current[i] = current
            total += current
        self._update_volts(total)

    def _update_volts(self, total_current: float) -> None:
        physics = self.profile.physics
        bus = physics.supply_voltage - physics.supply_resistance * total_current
        self._volts = [max(0.0, bus - sag) for sag in self.voltage_sag]

    def _post_feedback(self) -> None:
        """Encoder and feedback of every servo, posted to its memory (written into its table when next read)."""
        window = self._window_ticks * self.tick
        for i, servo in enumerate(self.servos):
            hist = self._history[i]
            out = self._out[i]
            current = self._current[i] / CURRENT_LSB
            if self._current_noise[i] > 0.0:
                current = abs(current + self._current_noise[i] * self._normal.next())
            servo.post_feedback(hist[-1], self.mechanics[i].direction * (hist[-1] - hist[0]) / window, out.pwm,
                                self._volts[i] * 10.0, self._fw[i].temperature, current, out.moving, out.status)
            if out.unload:
                with servo.lock:
                    if servo.get(Register.Torque_Enable):
                        servo.set(Register.Torque_Enable, 0)
