"""STS3215 control table as data: every register with its address, size, sign bit and memory area.

Shared by the bus client (:mod:`so101_driver.bus`) and the virtual servo (``so101_virtual``), so
the two sides can never disagree on where a register lives or how its sign is encoded.
Figures: Feetech STS3215 memory table and LeRobot's ``motors/feetech/tables.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from so101_common.joints import GRIPPER

__all__ = [
    "Area",
    "RegisterSpec",
    "Register",
    "MODEL_NUMBER_STS3215",
    "TABLE_SIZE",
    "FEEDBACK_BLOCK",
    "encode_sign_magnitude",
    "decode_sign_magnitude",
    "encode_register",
    "decode_register",
    "ErrorBit",
    "decode_error_bits",
    "BAUD_RATES",
    "LEROBOT_SERVO_SETTINGS",
    "LEROBOT_GRIPPER_SETTINGS",
]

MODEL_NUMBER_STS3215 = 777
TABLE_SIZE = 256  # bytes of addressable memory a servo answers for


class Area(Enum):
    EEPROM = "eeprom"  # persistent; writes need Lock = 0
    SRAM = "sram"  # volatile, writable
    READ_ONLY = "ro"  # written only by the servo firmware


@dataclass(frozen=True)
class RegisterSpec:
    address: int
    size: int  # bytes, little-endian (STS/SMS series)
    area: Area
    sign_bit: int | None = None  # sign-magnitude encoding with this bit as the sign
    unit: str = ""  # what one LSB means


class Register(Enum):
    """Every register the workspace uses, keyed by LeRobot's names."""

    Firmware_Major_Version = RegisterSpec(0, 1, Area.READ_ONLY)
    Firmware_Minor_Version = RegisterSpec(1, 1, Area.READ_ONLY)
    Model_Number = RegisterSpec(3, 2, Area.READ_ONLY)
    ID = RegisterSpec(5, 1, Area.EEPROM)
    Baud_Rate = RegisterSpec(6, 1, Area.EEPROM)
    Return_Delay_Time = RegisterSpec(7, 1, Area.EEPROM, unit="2 us")
    Response_Status_Level = RegisterSpec(8, 1, Area.EEPROM)
    Min_Position_Limit = RegisterSpec(9, 2, Area.EEPROM, unit="step")
    Max_Position_Limit = RegisterSpec(11, 2, Area.EEPROM, unit="step")
    Max_Temperature_Limit = RegisterSpec(13, 1, Area.EEPROM, unit="degC")
    Max_Voltage_Limit = RegisterSpec(14, 1, Area.EEPROM, unit="0.1 V")
    Min_Voltage_Limit = RegisterSpec(15, 1, Area.EEPROM, unit="0.1 V")
    Max_Torque_Limit = RegisterSpec(16, 2, Area.EEPROM, unit="0.1 %")
    Phase = RegisterSpec(18, 1, Area.EEPROM)
    Unloading_Condition = RegisterSpec(19, 1, Area.EEPROM)
    LED_Alarm_Condition = RegisterSpec(20, 1, Area.EEPROM)
    P_Coefficient = RegisterSpec(21, 1, Area.EEPROM)
    D_Coefficient = RegisterSpec(22, 1, Area.EEPROM)
    I_Coefficient = RegisterSpec(23, 1, Area.EEPROM)
    Minimum_Startup_Force = RegisterSpec(24, 2, Area.EEPROM, unit="0.1 %")
    CW_Dead_Zone = RegisterSpec(26, 1, Area.EEPROM, unit="step")
    CCW_Dead_Zone = RegisterSpec(27, 1, Area.EEPROM, unit="step")
    Protection_Current = RegisterSpec(28, 2, Area.EEPROM, unit="6.5 mA")
    Angular_Resolution = RegisterSpec(30, 1, Area.EEPROM)
    Homing_Offset = RegisterSpec(31, 2, Area.EEPROM, sign_bit=11, unit="step")
    Operating_Mode = RegisterSpec(33, 1, Area.EEPROM)
    Protective_Torque = RegisterSpec(34, 1, Area.EEPROM, unit="%")
    Protection_Time = RegisterSpec(35, 1, Area.EEPROM, unit="10 ms")
    Overload_Torque = RegisterSpec(36, 1, Area.EEPROM, unit="%")
    Torque_Enable = RegisterSpec(40, 1, Area.SRAM)
    Acceleration = RegisterSpec(41, 1, Area.SRAM, unit="100 step/s^2")
    Goal_Position = RegisterSpec(42, 2, Area.SRAM, sign_bit=15, unit="step")
    Goal_Time = RegisterSpec(44, 2, Area.SRAM, unit="ms")
    Goal_Velocity = RegisterSpec(46, 2, Area.SRAM, sign_bit=15, unit="step/s")
    Torque_Limit = RegisterSpec(48, 2, Area.SRAM, unit="0.1 %")
    Lock = RegisterSpec(55, 1, Area.SRAM)
    Present_Position = RegisterSpec(56, 2, Area.READ_ONLY, sign_bit=15, unit="step")
    Present_Velocity = RegisterSpec(58, 2, Area.READ_ONLY, sign_bit=15, unit="step/s")
    Present_Load = RegisterSpec(60, 2, Area.READ_ONLY, sign_bit=10, unit="0.1 %")
    Present_Voltage = RegisterSpec(62, 1, Area.READ_ONLY, unit="0.1 V")
    Present_Temperature = RegisterSpec(63, 1, Area.READ_ONLY, unit="degC")
    Status = RegisterSpec(65, 1, Area.READ_ONLY)
    Moving = RegisterSpec(66, 1, Area.READ_ONLY)
    Present_Current = RegisterSpec(69, 2, Area.READ_ONLY, sign_bit=15, unit="6.5 mA")
    Maximum_Acceleration = RegisterSpec(85, 1, Area.SRAM, unit="100 step/s^2")

    @property
    def spec(self) -> RegisterSpec:
        return self.value

    @property
    def address(self) -> int:
        return self.value.address

    @property
    def size(self) -> int:
        return self.value.size

    @classmethod
    def by_name(cls, name: str) -> Register:
        try:
            return cls[name]
        except KeyError as err:
            raise KeyError(f"unknown STS3215 register {name!r}") from err


# Present_Position .. Present_Current in one contiguous read (addresses 56..70, 15 bytes):
# position, velocity, load, voltage, temperature, (64 reserved), status, moving, (67-68), current.
FEEDBACK_BLOCK = (Register.Present_Position.address, Register.Present_Current.address + 2 - Register.Present_Position.address)


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    """Signed integer → Feetech sign-magnitude (magnitude below ``sign_bit``, sign at ``sign_bit``)."""
    limit = (1 << sign_bit) - 1
    magnitude = abs(value)
    if magnitude > limit:
        raise ValueError(f"magnitude {magnitude} does not fit below sign bit {sign_bit} (max {limit})")
    return magnitude | (1 << sign_bit) if value < 0 else magnitude


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    """Feetech sign-magnitude → signed integer."""
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if raw & (1 << sign_bit) else magnitude


def encode_register(register: Register, value: int) -> bytes:
    """A signed/unsigned register value → its little-endian bytes."""
    spec = register.spec
    raw = encode_sign_magnitude(value, spec.sign_bit) if spec.sign_bit is not None else value
    if not 0 <= raw < (1 << (8 * spec.size)):
        raise ValueError(f"{register.name}: value {value} does not fit in {spec.size} byte(s)")
    return raw.to_bytes(spec.size, "little")


def decode_register(register: Register, data: bytes | bytearray | memoryview) -> int:
    """Little-endian bytes of a register → its value (sign-magnitude decoded)."""
    raw = int.from_bytes(bytes(data[: register.size]), "little")
    spec = register.spec
    return decode_sign_magnitude(raw, spec.sign_bit) if spec.sign_bit is not None else raw


class ErrorBit(Enum):
    """Bits of a status packet's error byte (and of the Status register)."""

    VOLTAGE = 0
    ANGLE_SENSOR = 1
    OVERHEAT = 2
    OVERCURRENT = 3
    OVERLOAD = 5


def decode_error_bits(error: int) -> list[ErrorBit]:
    """The error bits set in a status byte, in bit order."""
    return [bit for bit in ErrorBit if error & (1 << bit.value)]


# Baud_Rate register index → bits per second (STS series).
BAUD_RATES: dict[int, int] = {0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800, 6: 57_600, 7: 38_400}


# LeRobot's SO-101 follower settings (``SOFollower.configure``), written in this order by
# the driver's ``FeetechBus.configure_lerobot``; the virtual arm's system identification replays recordings
# with the same values.
LEROBOT_SERVO_SETTINGS: tuple[tuple[Register, int], ...] = (
    (Register.Return_Delay_Time, 0),
    (Register.Maximum_Acceleration, 254),
    (Register.Acceleration, 254),
    (Register.Operating_Mode, 0),
    (Register.P_Coefficient, 16),
    (Register.I_Coefficient, 0),
    (Register.D_Coefficient, 32),
)
LEROBOT_GRIPPER_SETTINGS: tuple[tuple[Register, int], ...] = (
    (Register.Max_Torque_Limit, 500),
    (Register.Protection_Current, 250),
    (Register.Overload_Torque, round(GRIPPER.overload * 100)),  # the joint specification's protection facts
)
