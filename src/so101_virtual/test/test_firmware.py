"""The STS3215 firmware step function, without MuJoCo: P/D scaling, dead band, saturation, speed
profile, protections, temperature, voltage, modes and the DC-motor drive."""

from __future__ import annotations

import math

import pytest

from so101_feetech.control_table import Register, encode_register
from so101_virtual.firmware import (
    OVERCURRENT,
    OVERHEAT,
    OVERLOAD,
    VOLTAGE,
    FirmwareInputs,
    ServoModel,
    ServoSettings,
    initial_state,
    read_settings,
    settings_from_table,
    step,
)
from so101_virtual.profiles import FirmwareParams, JointParams
from so101_virtual.servo_memory import ServoMemory

DT = 0.001
JOINT = JointParams()
FIRMWARE = FirmwareParams(p_gain=0.25, d_gain=0.004, i_gain=0.05, acceleration_unit=100.0)
MODEL = ServoModel.from_profile(JOINT, FIRMWARE)
ON = dict(torque_enable=1, p=16, d=32, i=0, acceleration=0, goal_velocity=0)


def run(settings: ServoSettings, position: float = 2048.0, velocity: float = 0.0, current: float = 0.0,
        voltage: float = 12.0, passes: int = 1, model: ServoModel = MODEL, state=None):
    state = state or initial_state(position, model)
    out = None
    for _ in range(passes):
        out, state = step(settings, state, FirmwareInputs(position, velocity, current, voltage), model, DT)
    return out, state


def test_p_term_scales_with_error_and_register():
    for p, error in ((16, 10), (32, 10), (16, 40)):
        out, _ = run(ServoSettings(**{**ON, "p": p, "d": 0}, goal_position=2048 + error))
        assert out.pwm == pytest.approx(FIRMWARE.p_gain * p * error)
        # drive torque through the H-bridge: Kt·duty·V/R = stall torque × duty at rated voltage
        assert out.drive_torque == pytest.approx(JOINT.stall_torque * out.pwm / 1000.0)
        assert out.damping == pytest.approx(JOINT.emf_damping)


def test_d_term_opposes_measured_speed():
    out, _ = run(ServoSettings(**{**ON, "p": 0}, goal_position=2048, min_startup_force=0), position=2060, velocity=500.0)
    assert out.pwm == pytest.approx(-FIRMWARE.d_gain * 32 * 500.0)


def test_dead_band_and_minimum_startup_force():
    settings = ServoSettings(**ON, cw_dead_zone=3, ccw_dead_zone=5, min_startup_force=40)
    assert run(settings._replace(goal_position=2048 + 5))[0].pwm == 0.0  # e = +5 inside CCW band
    assert run(settings._replace(goal_position=2048 - 3))[0].pwm == 0.0  # e = −3 inside CW band
    assert run(settings._replace(goal_position=2048 + 6))[0].pwm == pytest.approx(40.0)  # lifted to the minimum
    assert run(settings._replace(goal_position=2048 - 4))[0].pwm == pytest.approx(-40.0)
    assert run(settings._replace(goal_position=2048 + 100))[0].pwm == pytest.approx(0.25 * 16 * 100)


def test_dead_band_off_is_a_continuous_pid():
    model = ServoModel.from_profile(JOINT, FirmwareParams(p_gain=0.25, dead_band=False))
    settings = ServoSettings(**{**ON, "d": 0}, cw_dead_zone=3, ccw_dead_zone=5, min_startup_force=40)
    assert run(settings._replace(goal_position=2050), model=model)[0].pwm == pytest.approx(0.25 * 16 * 2)
    assert run(settings._replace(goal_position=2048), position=2047.5, model=model)[0].pwm == pytest.approx(2.0)


def test_saturation_at_torque_limit_and_max_torque_limit():
    big = ServoSettings(**ON, goal_position=4000)
    assert run(big)[0].pwm == 1000.0
    assert run(big._replace(torque_limit=500))[0].pwm == 500.0
    assert run(big._replace(goal_position=100, torque_limit=300))[0].pwm == -300.0
    memory = ServoMemory(1)
    memory.set(Register.Max_Torque_Limit, 400)
    memory.set(Register.Torque_Limit, 1000)
    assert read_settings(memory).torque_limit == 400  # the lower of the two wins


def test_position_limits_clamp_the_goal():
    settings = ServoSettings(**{**ON, "d": 0}, goal_position=3000, min_position=1000, max_position=2100)
    out, state = run(settings)
    assert state.setpoint == 2100.0
    assert out.pwm == pytest.approx(0.25 * 16 * 52)


def test_speed_profile_limits_velocity_and_acceleration():
    settings = ServoSettings(**{**ON, "acceleration": 10, "goal_velocity": 800}, goal_position=4000)
    state = initial_state(0.0, MODEL)
    previous_v = 0.0
    top = 0.0
    for _ in range(6000):
        out, state = step(settings, state, FirmwareInputs(state.setpoint, 0.0, 0.0, 12.0), MODEL, DT)
        assert abs(state.setpoint_velocity) <= 800.0 + 1e-9
        dv = 10 * 100 * DT  # Acceleration 10 = 1000 step/s² (100 step/s² per unit here)
        arrived = state.setpoint == 4000.0
        assert abs(state.setpoint_velocity - previous_v) <= (2 * dv if arrived else dv) + 1e-6
        previous_v = state.setpoint_velocity
        top = max(top, state.setpoint_velocity)
    assert top == pytest.approx(800.0)
    assert state.setpoint == 4000.0 and state.setpoint_velocity == 0.0  # arrived and stopped


def test_no_profile_when_registers_are_zero_or_profile_disabled():
    settings = ServoSettings(**{**ON, "acceleration": 50}, goal_position=3000)
    _, state = run(settings)
    assert state.setpoint < 2100  # ramps
    model = ServoModel.from_profile(JOINT, FirmwareParams(speed_profile=False))
    _, state = run(settings, model=model)
    assert state.setpoint == 3000.0
    _, state = run(settings._replace(acceleration=0))
    assert state.setpoint == 3000.0


def test_torque_off_coasts_and_follows_present_position():
    out, state = run(ServoSettings(torque_enable=0, goal_position=3000), position=1234.0)
    assert out.drive_torque == 0.0 and out.damping == 0.0 and out.pwm == 0.0
    assert state.setpoint == 1234.0
    # switched on: ramps from where it is (not from a stale set-point)
    out, state = run(ServoSettings(**ON, goal_position=1234), position=1234.0, state=state)
    assert out.pwm == 0.0


def test_overload_bit_after_protection_time_and_unloading():
    blocked = ServoSettings(**ON, goal_position=3000, overload_torque=80, protection_time=20, unloading_condition=0)
    out, state = run(blocked, passes=199)  # 0.199 s > 80 %: not yet
    assert not out.status & OVERLOAD
    out, state = run(blocked, passes=2, state=state)
    assert out.status & OVERLOAD
    assert abs(out.pwm) == pytest.approx(200.0)  # limited to Protective_Torque (20 %)
    assert not out.unload
    # with the overload bit in Unloading_Condition the motor is switched off and stays off
    unload = blocked._replace(unloading_condition=OVERLOAD)
    out, state = run(unload, passes=201)
    assert out.unload and out.drive_torque == 0.0 and out.damping == 0.0
    out, state = run(unload, passes=50, state=state)
    assert out.unload and out.status & OVERLOAD
    # the host switches torque off then on: cleared, driving again
    _, state = run(unload._replace(torque_enable=0), state=state)
    out, state = run(unload, state=state)
    assert not out.unload and not out.status & OVERLOAD and out.drive_torque > 0


def test_overload_clears_when_demand_drops():
    blocked = ServoSettings(**ON, goal_position=3000, protection_time=10, unloading_condition=0)
    out, state = run(blocked, passes=120)
    assert out.status & OVERLOAD
    out, state = run(blocked._replace(goal_position=2048), state=state)
    assert not out.status & OVERLOAD


def test_overcurrent_bit():
    settings = ServoSettings(**ON, goal_position=2100, protection_current=100, protection_time=5, unloading_condition=0)
    out, _ = run(settings, current=100 * 0.0065 * 1.5, passes=60)
    assert out.status & OVERCURRENT
    out, _ = run(settings, current=100 * 0.0065 * 0.5, passes=60)
    assert not out.status & OVERCURRENT


def test_temperature_rises_with_current_and_sets_overheat():
    hot = JointParams(thermal_time_constant=1.0, thermal_resistance=20.0)
    model = ServoModel.from_profile(hot, FIRMWARE)
    settings = ServoSettings(**ON, max_temperature=40, unloading_condition=OVERHEAT)
    out, state = run(settings, current=0.0, passes=500, model=model)
    assert state.temperature == pytest.approx(25.0)
    out, state = run(settings, current=1.0, passes=3000, model=model)  # I²R·Rth = 4.44 W · 20 → +89 °C
    assert state.temperature > 40 and out.status & OVERHEAT and out.unload
    out, state = run(settings, current=0.0, passes=20000, model=model, state=state)  # cools below 35 °C
    assert state.temperature < 35 and not out.status & OVERHEAT


def test_voltage_bit_outside_limits():
    settings = ServoSettings(**ON, min_voltage=60, max_voltage=140)
    assert run(settings, voltage=5.0)[0].status & VOLTAGE
    assert run(settings, voltage=15.0)[0].status & VOLTAGE
    assert not run(settings, voltage=12.0)[0].status & VOLTAGE
    # lower supply, less torque for the same PWM
    high = run(settings._replace(goal_position=2148), voltage=12.0)[0].drive_torque
    low = run(settings._replace(goal_position=2148), voltage=9.0)[0].drive_torque
    assert low == pytest.approx(high * 9.0 / 12.0)


def test_pwm_and_wheel_modes():
    out, _ = run(ServoSettings(**{**ON, "mode": 2}, goal_time=-300))
    assert out.pwm == -300.0
    wheel = ServoSettings(**{**ON, "mode": 1, "goal_velocity": 1000})
    out, _ = run(wheel, velocity=1000.0)
    free_speed = 12.0 / JOINT.back_emf_constant * 4096 / (2 * math.pi)
    assert out.pwm == pytest.approx(1000.0 * 1000.0 / free_speed)


def test_dc_motor_curve():
    """Drive minus back-EMF damping: stall torque at zero speed, zero torque at the no-load speed."""
    out, _ = run(ServoSettings(**ON, goal_position=4000))
    assert out.drive_torque == pytest.approx(JOINT.stall_torque)
    free = out.drive_torque / out.damping
    assert free == pytest.approx(JOINT.no_load_speed / (1 - JOINT.no_load_current / JOINT.stall_current))


def test_settings_from_a_servo_memory():
    memory = ServoMemory(3)
    memory.write(Register.Goal_Position.address, encode_register(Register.Goal_Position, -20))
    memory.write(Register.P_Coefficient.address, bytes([16]))
    memory.write(Register.Torque_Enable.address, bytes([1]))
    memory.write(Register.Acceleration.address, bytes([254]))
    settings = settings_from_table(memory.snapshot())
    assert settings.goal_position == -20
    assert (settings.p, settings.d, settings.i) == (16, 32, 0)
    assert settings.torque_enable == 1 and settings.acceleration == 254
    assert settings.torque_limit == 1000 and settings.unloading_condition == 44
