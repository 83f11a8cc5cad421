"""ArmPhysics: gravity sag, backlash, friction, the speed limit, encoder and effort feedback, the ideal
profile against the MuJoCo position-servo model, and an unstable profile reported. (The cost of a simulated second is
``make bench``'s ``virtual.physics_cpu_per_simulated_s``.)"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_description.paths import mjcf_path
from so101_feetech.control_table import Register, encode_register
from so101_virtual.physics import STEPS_PER_RAD, ArmPhysics, JointMechanics, PhysicsError
from so101_virtual.profiles import load_profile, profile_from_dict
from so101_virtual.servo_memory import ServoMemory

LIFT = JOINT_NAMES.index("shoulder_lift")
JOINT_UPPER = [j.upper for j in JOINTS]
PAN = JOINT_NAMES.index("shoulder_pan")
# A pose with the upper arm roughly horizontal: shoulder_lift carries the whole arm.
REACH = [0.0, 0.0, 1.2, 0.3, 0.0, 0.5]


def memories() -> list[ServoMemory]:
    return [ServoMemory(i + 1) for i in range(len(JOINT_NAMES))]


def arm(profile="unfitted", positions=REACH, **kwargs) -> tuple[ArmPhysics, list[ServoMemory]]:
    mems = memories()
    return ArmPhysics(profile, mems, initial_positions=positions, **kwargs), mems


def write(memory: ServoMemory, register: Register, value: int) -> None:
    memory.write(register.address, encode_register(register, value))


def hold(mems, goals_rad=None, p=16, d=32) -> None:
    """LeRobot's settings, goal = the joint angles given (encoder zero at 2048, no homing), torque on."""
    for i, memory in enumerate(mems):
        write(memory, Register.P_Coefficient, p)
        write(memory, Register.D_Coefficient, d)
        write(memory, Register.Acceleration, 254)
        goal = memory.get(Register.Present_Position) if goals_rad is None else round(2048 + goals_rad[i] * STEPS_PER_RAD)
        write(memory, Register.Goal_Position, goal)
        write(memory, Register.Torque_Enable, 1)


def ramp_torque(physics: ArmPhysics, joint: int, target: float, seconds: float = 1.0) -> None:
    """Bring the external torque on ``joint`` to ``target`` smoothly (a hand, not a hammer: a step
    would slam the link across the backlash into the gear)."""
    start = physics.external_torque[joint]
    steps = round(seconds / 0.01)
    for k in range(1, steps + 1):
        torque: Any = np.zeros(6)
        torque[joint] = start + (target - start) * (0.5 - 0.5 * math.cos(math.pi * k / steps))
        physics.external_torque = torque
        physics.step(0.01)


def gravity_torque(physics: ArmPhysics, joint: int) -> float:
    """Generalized gravity force on a link joint at the current pose (N·m, + = pulls q up)."""
    m, d = physics.model, physics.data
    saved = d.qvel.copy()
    d.qvel[:] = 0.0
    mujoco.mj_forward(m, d)
    bias = -d.qfrc_bias[physics._link_v[joint]]
    d.qvel[:] = saved
    mujoco.mj_forward(m, d)
    return float(bias)


def test_gravity_sag_direction_and_magnitude():
    physics, mems = arm()
    hold(mems, REACH)
    physics.step(2.0)
    tau = gravity_torque(physics, LIFT)
    sag = physics.true_positions()[LIFT] - REACH[LIFT]
    assert abs(tau) > 0.2  # the arm is heavy there
    assert np.sign(sag) == np.sign(tau)  # it sags the way gravity pulls
    # a few hundredths of a rad, as the real arm (stiffness ≈ 10.7 N·m/rad at P 16, plus backlash)
    assert 0.01 < abs(sag) < 0.08
    # the servo reports the holding effort: PWM % of stall torque ≈ gravity torque (gearbox friction
    # carries a part of it, encoder noise through the D term makes single readings noisy)
    loads, currents = [], []
    for _ in range(20):
        physics.step(0.01)
        loads.append(mems[LIFT].get(Register.Present_Load))
        currents.append(mems[LIFT].get(Register.Present_Current))
    assert np.sign(np.mean(loads)) == -np.sign(tau)
    assert 0.4 * abs(tau) < abs(np.mean(loads)) / 1000 * 2.94 < 1.2 * abs(tau)
    assert 0.4 * abs(tau) < np.mean(currents) * 0.0065 * (2.94 / 2.7) < 1.2 * abs(tau)


def test_stiffer_p_sags_less_and_payload_sags_more():
    sags = {}
    frictionless = {"joint_defaults": {"coulomb_friction": 0.0, "output_friction": 0.0, "position_noise": 0.0}}
    payload = {**frictionless, "physics": {"payload_mass": 0.3, "payload_offset": [0.0, 0.0, 0.05]}}  # heavy_payload's
    for label, changes, p in (("p16", frictionless, 16), ("p32", frictionless, 32), ("payload", payload, 16)):
        physics, mems = arm(profile_from_dict(changes, base=load_profile("unfitted")))
        hold(mems, REACH, p=p)
        physics.step(2.0)
        sags[label] = abs(physics.true_positions()[LIFT] - REACH[LIFT])
    assert sags["p32"] < 0.7 * sags["p16"]
    assert sags["payload"] > 1.3 * sags["p16"]


def test_backlash_dead_band_on_reversal():
    """Torque off, no gravity: a slowly ramped torque pushes the link across the free play (the rotor's
    friction holds the motor side); reversing it shows a dead band of the profile's size."""
    backlash = 0.04
    profile = profile_from_dict({"physics": {"gravity_scale": 0.0},
                                 "joint_defaults": {"backlash": backlash, "coulomb_friction": 0.3}})
    physics, _ = arm(profile, positions=[0.0] * 6)
    ends = []
    for target in (0.03, -0.03, 0.03, -0.03):  # below the rotor's 0.3 N·m, above the bearing's 0.005
        ramp_torque(physics, PAN, target)
        physics.step(0.3)
        ends.append(physics.true_positions()[PAN])
        assert physics.rotor_positions()[PAN] == pytest.approx(0.0, abs=2e-3)  # the motor side stays
    width = [abs(a - b) for a, b in zip(ends, ends[1:], strict=False)]
    assert np.allclose(width, backlash, rtol=0.1)


def test_no_backlash_no_dead_band():
    profile = profile_from_dict({"physics": {"gravity_scale": 0.0}, "joint_defaults": {"coulomb_friction": 0.1}})
    physics, _ = arm(profile, positions=[0.0] * 6)
    assert physics.model.nv == len(JOINT_NAMES)  # no rotor bodies at all
    ramp_torque(physics, PAN, 0.03)
    physics.step(0.5)
    assert physics.true_positions()[PAN] == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize("backlash", [0.0, 0.02])
def test_friction_holds_a_small_torque_and_yields_to_a_large_one(backlash):
    profile = profile_from_dict({"physics": {"gravity_scale": 0.0},
                                 "joint_defaults": {"backlash": backlash, "coulomb_friction": 0.1}})
    physics, _ = arm(profile, positions=[0.0] * 6)
    ramp_torque(physics, PAN, 0.08)  # below friction: at most the free play
    physics.step(0.5)
    assert abs(physics.true_positions()[PAN]) <= backlash / 2 + 1e-3
    ramp_torque(physics, PAN, 0.3, seconds=0.2)  # well above: it turns
    physics.step(0.3)
    assert physics.true_positions()[PAN] > 0.2


def test_speed_limited_by_the_motor_and_goal_reached():
    physics, mems = arm(positions=[0.0] * 6)
    hold(mems)
    goal = [1.2, 0, 0, 0, 0, 0]
    write(mems[PAN], Register.Goal_Position, round(2048 + goal[PAN] * STEPS_PER_RAD))
    top = 0.0
    for _ in range(100):
        physics.step(0.01)
        top = max(top, abs(physics.true_velocities()[PAN]))
    no_load = load_profile("unfitted").joint("shoulder_pan").no_load_speed
    assert 0.5 * no_load < top <= 1.05 * no_load
    assert physics.true_positions()[PAN] == pytest.approx(goal[PAN], abs=0.025)  # friction vs P: ±0.017 rad
    assert abs(mems[PAN].get(Register.Present_Velocity)) < 60  # at rest: below one 50 step/s quantum + noise
    # Present_Velocity is quantised to 50 step/s (20 ms window)
    write(mems[PAN], Register.Goal_Position, 2048)
    speeds = set()
    for _ in range(30):
        physics.step(0.01)
        speeds.add(mems[PAN].get(Register.Present_Velocity))
    assert all(v % 50 == 0 for v in speeds) and min(speeds) < -1000


def test_encoder_reads_the_link_angle_in_whole_steps():
    mechanics = [JointMechanics(2000.0 + 17 * i, 1 if i % 2 else -1) for i in range(6)]
    physics, mems = arm("ideal", positions=[0.3, -0.5, 0.7, -0.2, 1.0, 0.4], mechanics=mechanics)
    write(mems[2], Register.Homing_Offset, -100)
    physics.step(0.002)
    q = physics.true_positions()
    for i, memory in enumerate(mems):
        actual = mechanics[i].encoder_zero + mechanics[i].direction * q[i] * STEPS_PER_RAD
        homing = memory.get(Register.Homing_Offset)
        assert memory.get(Register.Present_Position) == round(actual) - homing


def test_torque_off_feedback_and_voltage_sag():
    physics, mems = arm()
    physics.step(0.05)
    assert all(m.get(Register.Present_Load) == 0 and m.get(Register.Present_Current) <= 4 for m in mems)  # noise
    assert mems[0].get(Register.Present_Voltage) == 120
    assert mems[0].get(Register.Present_Temperature) == 25
    hold(mems, REACH)
    physics.voltage_sag = [3.0] * 6
    physics.step(0.5)
    assert 85 <= mems[0].get(Register.Present_Voltage) <= 90
    assert physics.voltages()[LIFT] < 9.0


def test_unloading_switches_the_torque_register_off():
    """Pushing against the hard stop at full torque trips the overload protection (Unloading_Condition
    44 includes it): Torque_Enable reads 0 and the Status bit stays until the host enables torque."""
    physics, mems = arm()
    hold(mems, REACH)
    write(mems[LIFT], Register.Protection_Time, 10)  # 0.1 s
    beyond_stop = round(2048 + (JOINT_UPPER[LIFT] + 0.3) * STEPS_PER_RAD)
    write(mems[LIFT], Register.Goal_Position, beyond_stop)
    physics.step(1.0)
    assert mems[LIFT].get(Register.Status) & (1 << 5)
    assert mems[LIFT].get(Register.Torque_Enable) == 0
    assert mems[LIFT].get(Register.Present_Load) == 0
    assert all(m.get(Register.Torque_Enable) == 1 for i, m in enumerate(mems) if i != LIFT)


def test_ideal_profile_tracks_like_the_mujoco_position_servos():
    """The ideal profile reproduces so101_position.xml (kp 998.22, kv 2.731) on the same commands."""
    reference = mujoco.MjModel.from_xml_path(str(mjcf_path("position")))
    reference.opt.timestep = 0.001
    ref = mujoco.MjData(reference)
    start = np.array([0.0, -0.5, 0.8, 0.3, 0.0, 0.5])
    ref.qpos[:] = start
    physics, mems = arm("ideal", positions=start)
    hold(mems, start)
    ref.ctrl[:] = start
    worst = 0.0
    for k in range(150):  # 1.5 s of a sinusoidal command
        command = start + 0.4 * np.sin(2 * math.pi * 0.7 * k * 0.01) * np.array([1, 1, -1, 1, 1, 0.5])
        for i, memory in enumerate(mems):
            write(memory, Register.Goal_Position, round(2048 + command[i] * STEPS_PER_RAD))
        ref.ctrl[:] = command
        mujoco.mj_step(reference, ref, nstep=10)
        physics.step(0.01)
        worst = max(worst, float(np.max(np.abs(physics.true_positions() - ref.qpos))))
    assert worst < 0.01  # rad: a few encoder steps of command quantisation and dead band


@pytest.mark.parametrize("corner", [
    {"joint_defaults": {"backlash": 0.2, "gear_stiffness": 1e5, "armature": 1e-4, "coulomb_friction": 2.0}},
    {"joint_defaults": {"backlash": 0.2, "gear_stiffness": 1.0, "armature": 1.0}, "physics": {"timestep": 0.005},
     "firmware": {"loop_rate": 50}},
    {"joint_defaults": {"armature": 1e-4, "stall_torque": 50.0, "no_load_speed": 100.0},
     "physics": {"payload_mass": 2.0, "timestep": 1e-4}, "firmware": {"loop_rate": 10000, "p_gain": 5.0}},
])
def test_extreme_valid_profiles_stay_stable(corner):
    physics, mems = arm(profile_from_dict(corner), positions=[0.0] * 6)
    hold(mems, [0.5, -0.5, 0.5, 0.5, 0.5, 0.5])
    physics.step(0.3)
    q = physics.true_positions()
    assert np.all(np.isfinite(q)) and np.all(np.abs(q) < 3.2)


def test_an_unstable_profile_is_reported_not_silently_reset():
    absurd = profile_from_dict({"joint_defaults": {"backlash": 0.2, "armature": 1e-4, "stall_torque": 50.0},
                                "physics": {"timestep": 0.005}, "firmware": {"loop_rate": 50, "p_gain": 100.0,
                                                                            "d_gain": 10.0}})
    physics, mems = arm(absurd, positions=[0.0] * 6)
    hold(mems, [0.5, -0.5, 0.5, 0.5, 0.5, 0.5])
    with pytest.raises(PhysicsError, match="unstable"):
        physics.step(1.0)
