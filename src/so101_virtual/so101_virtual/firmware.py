"""The STS3215's firmware as a pure step function: registers + measurements in, motor drive out.

One call of :func:`step` is one pass of the servo's control loop (``FirmwareParams.loop_rate``, 1 kHz
by default) for one servo. It has no I/O and no hidden state: the control-table values come in as a
:class:`ServoSettings` snapshot (:func:`read_settings`), the encoder/current/voltage measurements as
:class:`FirmwareInputs`, the loop's memory as an immutable :class:`FirmwareState`; it returns the drive
for the physics (:class:`FirmwareOutput`) and the next state.

What one pass does (position mode, ``Operating_Mode`` 0):

1. **Goal**: ``Goal_Position`` clamped into ``[Min_Position_Limit, Max_Position_Limit]`` (when min < max).
2. **Speed profile**: a trapezoidal set-point moves towards the goal at most at ``Goal_Velocity``
   (step/s; 0 = no limit, i.e. the motor's own speed, as with LeRobot's default Phase bit 3) with
   ``Acceleration``·100 step/s² (0 = no ramp). While torque is off the set-point follows the present
   position, so enabling torque ramps from where the arm is to ``Goal_Position`` (which the firmware
   does not overwrite).
3. **PID** on ``e = set-point − Present_Position`` (steps), output a PWM in 0.1 %:
   ``PWM = p_gain·P·e + d_gain·D·(v_set − v) + i_gain·I·∫e`` (derivative on measurement plus the
   profile's velocity, so a goal jump kicks through P only). Inside the dead band
   ``−CW_Dead_Zone ≤ e ≤ CCW_Dead_Zone`` (once the profile has arrived) the output is 0; outside it
   the output is at least ``Minimum_Startup_Force``.
4. **Saturation**: ``|PWM| ≤ min(Torque_Limit, Max_Torque_Limit)``.
5. **Protections** (bits of ``Status``): overload (bit 5) after ``Protection_Time``·10 ms above
   ``Overload_Torque`` %; overcurrent (bit 3) after the same time above ``Protection_Current``·6.5 mA;
   overheat (bit 2) above ``Max_Temperature_Limit`` (clears 5 °C below); voltage (bit 0) outside
   ``[Min_Voltage_Limit, Max_Voltage_Limit]``. While overload/overcurrent hold, the output is limited to
   ``Protective_Torque`` %; a bit also set in ``Unloading_Condition`` switches the torque off
   (``FirmwareOutput.unload``: the owner writes ``Torque_Enable = 0``). Latched bits clear when the host
   enables torque again.
6. **H-bridge and DC motor** (at the output shaft): the duty ``PWM/1000`` at supply voltage ``V`` gives
   the drive torque ``Kt·duty·V/R``; the back-EMF adds the damping ``Kt·Ke/R`` (an active bridge, even at
   duty 0, brakes the motor; a disabled bridge coasts). The physics integrates that damping implicitly,
   which keeps it stable at any rotor inertia; together they make the linear torque-speed curve of a DC
   motor (stall torque at zero speed, no-load speed at full duty).
7. **Temperature**: first-order winding model, ``dT/dt = (I²R·R_th − (T − T_amb)) / τ_th``.

Other modes: 1 (wheel) runs at ``Goal_Velocity`` step/s (feed-forward + P·0.01 s on the speed error); 2 (PWM) drives the
duty given in ``Goal_Time`` (0.1 %, sign at bit 10) open loop; 3 (step) is served as position mode.

``Present_Load`` is the signed PWM output in 0.1 % — what the real servo reports, and equal to the
percentage of stall torque the motor produces when the joint is still.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from so101_feetech.control_table import ErrorBit, Register, decode_sign_magnitude
from so101_virtual.profiles import FirmwareParams, JointParams

__all__ = [
    "ServoSettings",
    "ServoModel",
    "FirmwareInputs",
    "FirmwareState",
    "FirmwareOutput",
    "settings_from_table",
    "read_settings",
    "initial_state",
    "step",
    "VOLTAGE",
    "OVERHEAT",
    "OVERCURRENT",
    "OVERLOAD",
    "CURRENT_LSB",
]

VOLTAGE = 1 << ErrorBit.VOLTAGE.value
OVERHEAT = 1 << ErrorBit.OVERHEAT.value
OVERCURRENT = 1 << ErrorBit.OVERCURRENT.value
OVERLOAD = 1 << ErrorBit.OVERLOAD.value
CURRENT_LSB = 0.0065  # A per Present_Current / Protection_Current unit
OVERHEAT_HYSTERESIS = 5.0  # °C below Max_Temperature_Limit before the overheat bit clears
PWM_FULL = 1000.0  # PWM, Torque_Limit and Present_Load are in 0.1 %
MOVING_SPEED = 20.0  # step/s above which Moving reads 1


class ServoSettings(NamedTuple):
    """The control-table values the loop reads (decoded; signed registers signed)."""

    torque_enable: int = 0
    mode: int = 0
    goal_position: int = 2048
    goal_time: int = 0  # PWM-mode duty (0.1 %, signed)
    goal_velocity: int = 0  # step/s (signed in wheel mode)
    acceleration: int = 0  # 100 step/s²
    torque_limit: int = 1000  # min(Torque_Limit, Max_Torque_Limit), 0.1 %
    p: int = 32
    d: int = 32
    i: int = 0
    min_position: int = 0
    max_position: int = 4095
    cw_dead_zone: int = 1
    ccw_dead_zone: int = 1
    min_startup_force: int = 16  # 0.1 %
    overload_torque: int = 80  # %
    protection_time: int = 200  # 10 ms
    protective_torque: int = 20  # %
    protection_current: int = 500  # 6.5 mA
    unloading_condition: int = 44
    max_temperature: int = 70  # °C
    min_voltage: int = 40  # 0.1 V
    max_voltage: int = 140  # 0.1 V


def _u8(table: bytes, reg: Register) -> int:
    return table[reg.address]


def _u16(table: bytes, reg: Register) -> int:
    a = reg.address
    return table[a] | (table[a + 1] << 8)


def settings_from_table(table: bytes) -> ServoSettings:
    """Decode a control-table image (``ServoMemory.snapshot()``) into :class:`ServoSettings`."""
    R = Register
    return ServoSettings(
        torque_enable=_u8(table, R.Torque_Enable),
        mode=_u8(table, R.Operating_Mode),
        goal_position=decode_sign_magnitude(_u16(table, R.Goal_Position), 15),
        goal_time=decode_sign_magnitude(_u16(table, R.Goal_Time), 10),
        goal_velocity=decode_sign_magnitude(_u16(table, R.Goal_Velocity), 15),
        acceleration=_u8(table, R.Acceleration),
        torque_limit=min(_u16(table, R.Torque_Limit), _u16(table, R.Max_Torque_Limit)),
        p=_u8(table, R.P_Coefficient),
        d=_u8(table, R.D_Coefficient),
        i=_u8(table, R.I_Coefficient),
        min_position=_u16(table, R.Min_Position_Limit),
        max_position=_u16(table, R.Max_Position_Limit),
        cw_dead_zone=_u8(table, R.CW_Dead_Zone),
        ccw_dead_zone=_u8(table, R.CCW_Dead_Zone),
        min_startup_force=_u16(table, R.Minimum_Startup_Force),
        overload_torque=_u8(table, R.Overload_Torque),
        protection_time=_u8(table, R.Protection_Time),
        protective_torque=_u8(table, R.Protective_Torque),
        protection_current=_u16(table, R.Protection_Current),
        unloading_condition=_u8(table, R.Unloading_Condition),
        max_temperature=_u8(table, R.Max_Temperature_Limit),
        min_voltage=_u8(table, R.Min_Voltage_Limit),
        max_voltage=_u8(table, R.Max_Voltage_Limit),
    )


def read_settings(memory: object) -> ServoSettings:
    """:class:`ServoSettings` of a ``ServoMemory`` (one consistent snapshot)."""
    return settings_from_table(memory.snapshot())  # type: ignore[attr-defined]


class ServoModel(NamedTuple):
    """The constants one servo's loop needs, flattened from the profile for speed."""

    p_gain: float
    d_gain: float
    i_gain: float
    unlimited_speed: float  # step/s, inf = none
    unlimited_acceleration: float  # step/s², inf = none
    resistance: float  # Ω
    torque_constant: float  # N·m/A at the output
    back_emf: float  # V·s/rad at the output
    emf_damping: float  # N·m·s/rad
    no_load_speed_per_volt: float  # rad/s per V
    thermal_resistance: float  # °C/W
    thermal_time_constant: float  # s
    ambient: float  # °C
    steps_per_rad: float
    speed_profile: bool  # False: the set-point jumps to the goal whatever Acceleration/Goal_Velocity say
    acceleration_unit: float  # step/s² per Acceleration unit
    dead_band: bool  # False: ignore CW/CCW_Dead_Zone and Minimum_Startup_Force

    @classmethod
    def from_profile(cls, joint: JointParams, firmware: FirmwareParams, ambient: float = 25.0,
                     steps_per_turn: int = 4096) -> ServoModel:
        return cls(
            p_gain=firmware.p_gain,
            d_gain=firmware.d_gain,
            i_gain=firmware.i_gain,
            unlimited_speed=firmware.unlimited_speed or math.inf,
            unlimited_acceleration=firmware.unlimited_acceleration or math.inf,
            resistance=joint.winding_resistance,
            torque_constant=joint.torque_constant,
            back_emf=joint.back_emf_constant,
            emf_damping=joint.emf_damping,
            no_load_speed_per_volt=1.0 / joint.back_emf_constant,
            thermal_resistance=joint.thermal_resistance,
            thermal_time_constant=joint.thermal_time_constant,
            ambient=ambient,
            steps_per_rad=steps_per_turn / (2 * math.pi),
            speed_profile=firmware.speed_profile,
            acceleration_unit=firmware.acceleration_unit,
            dead_band=firmware.dead_band,
        )


class FirmwareInputs(NamedTuple):
    """What the loop measures this pass."""

    position: float  # Present_Position as the loop resolves it, steps (whole steps on a real servo)
    velocity: float  # step/s: encoder change over the derivative window
    current: float  # motor current magnitude, A (last physics step)
    voltage: float  # supply voltage at the servo, V


class FirmwareState(NamedTuple):
    """The loop's memory between passes."""

    setpoint: float  # profile position, steps
    setpoint_velocity: float  # profile velocity, step/s
    integral: float  # ∫e dt, step·s
    overload_time: float  # s above Overload_Torque
    overcurrent_time: float  # s above Protection_Current
    temperature: float  # winding temperature, °C
    latched: int  # latched protection bits (overload, overcurrent, overheat)
    enabled: bool  # Torque_Enable was on in the previous pass (to see the host switch it on)
    tripped: bool  # a protection unloaded the motor; cleared when the host switches torque on again


class FirmwareOutput(NamedTuple):
    """The drive this pass and the feedback registers it determines."""

    drive_torque: float  # N·m at the output: Kt·duty·V/R (the voltage-driven part)
    damping: float  # N·m·s/rad: back-EMF braking of an active bridge (0 when coasting)
    pwm: float  # 0.1 %, signed (Present_Load)
    status: int  # Status register bits
    moving: bool  # Moving register
    unload: bool  # a protection switched the torque off: set Torque_Enable to 0


def initial_state(position: float, model: ServoModel) -> FirmwareState:
    """Power-up state: set-point at the present position, windings at ambient temperature."""
    return FirmwareState(float(position), 0.0, 0.0, 0.0, 0.0, model.ambient, 0, False, False)


def _profile(sp: float, spv: float, goal: float, vmax: float, amax: float, dt: float) -> tuple[float, float]:
    """One step of a trapezoidal set-point towards ``goal`` (limits inf = none)."""
    err = goal - sp
    if amax == math.inf:
        if vmax == math.inf or abs(err) <= vmax * dt:
            return goal, 0.0
        v = math.copysign(vmax, err)
        return sp + v * dt, v
    # speed that still lets us stop at the goal (discrete-time braking curve), capped at vmax, reached
    # within the acceleration limit
    dv = amax * dt
    half = 0.5 * dv * dt
    v_stop = math.copysign(min(vmax, (math.sqrt(half * half + 2.0 * amax * abs(err) * dt * dt) - half) / dt), err)
    v = min(max(v_stop, spv - dv), spv + dv)
    new = sp + v * dt
    if (goal - new) * err <= 0.0 or (abs(err) < 0.5 and abs(v) <= dv):  # crossed or arrived
        return goal, 0.0
    return new, v


def step(settings: ServoSettings, state: FirmwareState, inputs: FirmwareInputs, model: ServoModel,
         dt: float) -> tuple[FirmwareOutput, FirmwareState]:
    """One pass of the servo's control loop (see the module docstring)."""
    # Every field unpacked at once: this runs six times per simulated millisecond, and one unpacking costs less
    # than the dozens of named-tuple attribute reads it replaces (the physics' largest Python cost).
    (torque_enable, mode, goal_position, goal_time, goal_velocity, acceleration, torque_limit, p, d, i,
     min_position, max_position, cw_dead_zone, ccw_dead_zone, min_startup_force, overload_torque, protection_time,
     protective_torque, protection_current, unloading_condition, max_temperature, min_voltage, max_voltage) = settings
    (setpoint, setpoint_velocity, integral, overload_time, overcurrent_time, temperature, latched, was_enabled,
     tripped) = state
    (p_gain, d_gain, i_gain, unlimited_speed, unlimited_acceleration, resistance, torque_constant, _back_emf,
     emf_damping, no_load_speed_per_volt, thermal_resistance, thermal_time_constant, ambient, steps_per_rad,
     speed_profile, acceleration_unit, dead_band) = model
    position, measured_velocity, current, voltage = inputs
    position = float(position)

    # --- temperature and voltage (whatever the torque state) ---
    heat = current * current * resistance
    temperature = temperature + dt * (heat * thermal_resistance - (temperature - ambient)) / thermal_time_constant
    if temperature > max_temperature:
        latched |= OVERHEAT
    elif temperature < max_temperature - OVERHEAT_HYSTERESIS:
        latched &= ~OVERHEAT
    volt_bit = VOLTAGE if not min_voltage <= voltage * 10.0 <= max_voltage else 0

    register_on = torque_enable != 0
    sp, spv = setpoint, setpoint_velocity
    if register_on and not was_enabled:  # the host switched torque on: clear protections, start here
        latched &= OVERHEAT  # overheat clears only by cooling
        tripped = False
        sp, spv, integral, overload_time, overcurrent_time = position, 0.0, 0.0, 0.0, 0.0
    enabled = register_on and not tripped

    pwm = 0.0
    goal = sp
    if not enabled:
        sp, spv, integral = position, 0.0, 0.0
    else:
        if mode == 2:  # open-loop PWM
            pwm = float(goal_time)
        elif mode == 1:  # wheel: speed control
            vmax = float(goal_velocity)
            amax = acceleration * acceleration_unit if acceleration else unlimited_acceleration
            dv = amax * dt
            spv = min(max(vmax, spv - dv), spv + dv)
            free_speed = no_load_speed_per_volt * voltage * steps_per_rad  # step/s at full duty
            pwm = PWM_FULL * spv / max(free_speed, 1e-9) + p_gain * p * (spv - measured_velocity) * 0.01
            sp = position
        else:  # position (0) and step (3) modes
            goal = float(goal_position)
            if min_position < max_position:
                goal = min(max(goal, float(min_position)), float(max_position))
            if speed_profile:
                vmax = float(abs(goal_velocity)) if goal_velocity else unlimited_speed
                amax = acceleration * acceleration_unit if acceleration else unlimited_acceleration
                sp, spv = _profile(sp, spv, goal, vmax, amax, dt)
            else:
                sp, spv = goal, 0.0
            err = sp - position
            if dead_band and sp == goal and -cw_dead_zone <= err <= ccw_dead_zone:
                pwm = 0.0
            else:
                if i:
                    integral += err * dt
                    i_limit = torque_limit / (i_gain * i) if i_gain else math.inf
                    integral = min(max(integral, -i_limit), i_limit)
                pwm = p_gain * p * err + d_gain * d * (spv - measured_velocity) + i_gain * i * integral
                if dead_band and 0.0 < abs(pwm) < min_startup_force:
                    pwm = math.copysign(float(min_startup_force), pwm)

        limit = float(torque_limit)
        pwm = min(max(pwm, -limit), limit)
        # --- overload / overcurrent protection ---
        if abs(pwm) > overload_torque * 10.0:
            overload_time += dt
        else:
            overload_time = 0.0
            latched &= ~OVERLOAD
        if current > protection_current * CURRENT_LSB:
            overcurrent_time += dt
        else:
            overcurrent_time = 0.0
            latched &= ~OVERCURRENT
        protect_after = protection_time * 0.01
        if overload_time >= protect_after and overload_time > 0.0:
            latched |= OVERLOAD
        if overcurrent_time >= protect_after and overcurrent_time > 0.0:
            latched |= OVERCURRENT
        if latched & (OVERLOAD | OVERCURRENT):
            guard = protective_torque * 10.0
            pwm = min(max(pwm, -guard), guard)

    status = latched | volt_bit
    trip = enabled and bool(status & unloading_condition)
    tripped = tripped or trip
    bridge_on = enabled and not trip
    if bridge_on:
        drive = torque_constant * (pwm / PWM_FULL) * voltage / resistance
        damping = emf_damping
    else:
        drive = 0.0
        damping = 0.0
        pwm = 0.0
    moving = (bridge_on and sp != goal) or abs(measured_velocity) > MOVING_SPEED
    if not bridge_on:
        sp, spv, integral = position, 0.0, 0.0
    new_state = FirmwareState(sp, spv, integral, overload_time, overcurrent_time, temperature, latched,
                              register_on, tripped)
    return FirmwareOutput(drive, damping, pwm, status, moving, register_on and tripped), new_state
