"""Replay a recording's commands through the virtual arm's own physics and firmware, in simulated time.

The arm is built exactly as ``so101 virtual-bus`` builds it (:class:`~so101_virtual.physics.ArmPhysics`
over six :class:`~so101_virtual.servo_memory.ServoMemory` control tables, the profile's firmware, motor,
gearbox and encoder), with LeRobot's servo settings (:data:`so101_feetech.control_table.LEROBOT_SERVO_SETTINGS`:
P 16, D 32, I 0, Acceleration 254) and torque on, placed at the recording's first measured state.
Each command is written to ``Goal_Position`` at its recorded time stamp (the real loop's timing and
jitter included), and ``Present_Position`` is read at that same instant before the new goal can act,
as the real loop reads the state right after sending the command. No bus, no threads, no wall clock:
the simulation runs as fast as the physics and firmware step.
"""

from __future__ import annotations

import numpy as np

from so101_common.joints import JOINTS
from so101_feetech.calibration import LOAD_FULL_SCALE, JointMapping
from so101_feetech.control_table import LEROBOT_GRIPPER_SETTINGS, LEROBOT_SERVO_SETTINGS, Register
from so101_virtual.physics import STEPS_PER_RAD, ArmPhysics, JointMechanics
from so101_virtual.profiles import GapProfile, load_profile
from so101_virtual.servo_memory import ServoMemory
from so101_virtual.sysid.recording import Recording

__all__ = ["ArmPlant", "simulate", "lerobot_servos"]

_ZERO = 2048  # encoder reading at joint angle 0 (JointMechanics() default, Homing_Offset 0)


def lerobot_servos() -> list[ServoMemory]:
    """Six control tables as LeRobot configures a follower (torque still off)."""
    servos = []
    for spec in JOINTS:
        memory = ServoMemory(spec.servo_id)
        settings = LEROBOT_SERVO_SETTINGS + (LEROBOT_GRIPPER_SETTINGS if spec.is_gripper else ())
        for register, value in settings:
            memory.set(register, value)
        servos.append(memory)
    return servos


def _raw(angle: float) -> int:
    return int(np.clip(round(_ZERO + angle * STEPS_PER_RAD), 0, 4095))


def simulate(profile: GapProfile | str, recording: Recording) -> np.ndarray:
    """The virtual arm's reported positions (N, J) rad for ``recording``'s commands (see module doc)."""
    plant = ArmPlant(profile, recording.state[0])
    out = np.empty_like(recording.state)
    for k, (when, command) in enumerate(zip(recording.time, recording.command, strict=True)):
        out[k] = plant.exchange(when, command)
    return out


class ArmPlant:
    """The virtual arm as a plant stepped by its controller, in simulated time.

    :meth:`exchange` is one frame of the host loop: advance the physics to ``when`` (s from the
    start), read every servo's ``Present_Position`` (rad), then write the new goal — the order of a
    LeRobot loop that reads the state right after sending the previous command. ``simulate`` is this
    loop over a recording; closed-loop evaluations call it with a controller in between.

    Units: by default every joint's zero is encoder step 2048 and a step is 2π/4096 rad. ``calibrated``: the
    servos hold the LeRobot calibration of their mechanics (as a calibrated virtual follower does) and positions
    and goals go through the driver's unit mapping of it, so the radians are the driver's: a step is 2π/4095 rad,
    ``wrist_roll`` (calibrated over the full turn) has its zero between two steps, the gripper its own scale.
    """

    def __init__(self, profile: GapProfile | str, initial_positions: np.ndarray, hand_stiffness: float | None = None,
                 calibrated: bool = False) -> None:
        """``hand_stiffness`` (N·m/rad): a hand holds every joint where it starts (:class:`ArmPhysics`' hand), e.g. an
        object between the gripper's fingers that stops them closing."""
        self.profile = load_profile(profile)
        self._servos = lerobot_servos()
        mechanics = [JointMechanics() for _ in JOINTS]
        self._mapping: JointMapping | None = None
        if calibrated:
            from so101_virtual.robot import calibration_for, store_calibration

            calibration = calibration_for(mechanics)
            store_calibration(self._servos, calibration)
            self._mapping = JointMapping.from_calibration(calibration)
        start = np.asarray(initial_positions, dtype=np.float64)
        # One I/O batch per frame: goals change only when a command is written, between step calls.
        self._physics = ArmPhysics(self.profile, self._servos, mechanics, initial_positions=start,
                                   io_period=1.0, hand=hand_stiffness is not None, hand_stiffness=hand_stiffness or 0.0)
        if hand_stiffness is not None:
            self._physics.set_hand(start)
        for memory in self._servos:
            memory.set(Register.Goal_Position, memory.get(Register.Present_Position))
            memory.set(Register.Torque_Enable, 1)
        self._done = 0

    def exchange(self, when: float, command: np.ndarray) -> np.ndarray:
        """Positions (J,) rad reported at ``when``, then ``command`` (J,) rad becomes the goal."""
        reported = self.read(when)
        self.send(command)
        return reported

    def read(self, when: float) -> np.ndarray:
        """Advance the physics to ``when`` (s) and return the positions (J,) rad the servos report."""
        due = int(round(when / self._physics.tick))
        if due > self._done:
            self._physics.step_ticks(due - self._done)
            self._done = due
        present = np.array([memory.get(Register.Present_Position) for memory in self._servos])
        return (present - _ZERO) / STEPS_PER_RAD if self._mapping is None else self._mapping.to_rad(present)

    def efforts(self) -> np.ndarray:
        """Efforts (J,) N·m as the driver publishes them: Present_Load (0.1 % of full torque, signed) × max effort."""
        return np.array([memory.get(Register.Present_Load) / LOAD_FULL_SCALE * spec.max_effort
                         for memory, spec in zip(self._servos, JOINTS, strict=True)])

    def send(self, command: np.ndarray) -> None:
        """Write ``command`` (J,) rad as every servo's goal (clipped to the encoder's range; calibrated: to the
        joint's calibrated range, as the driver clamps it)."""
        if self._mapping is not None:
            goals = self._mapping.clamp_raw(self._mapping.to_raw(np.asarray(command)))
            for memory, raw in zip(self._servos, goals.tolist(), strict=True):
                memory.set(Register.Goal_Position, raw)
            return
        for memory, goal in zip(self._servos, command, strict=True):
            memory.set(Register.Goal_Position, _raw(goal))

    def status(self) -> list[int]:
        """Every servo's ``Status`` register (protection bits: overload, overcurrent, overheat, voltage)."""
        return [memory.get(Register.Status) for memory in self._servos]

    def true_positions(self) -> np.ndarray:
        """Joint angles (J,) rad of the mechanism itself (no encoder quantisation or noise)."""
        return self._physics.true_positions()
