"""ServoMemory: factory table, host-side rules (read-only, EEPROM lock, ID/baud) and firmware side."""

import threading

import pytest

from so101_feetech.control_table import TABLE_SIZE, Register, encode_register
from so101_virtual.servo_memory import EEPROM_END, ServoMemory, make_servos


def host_write(memory: ServoMemory, register: Register, value: int) -> None:
    assert memory.write(register.address, encode_register(register, value))


def test_factory_table() -> None:
    m = ServoMemory(3)
    assert m.get(Register.Model_Number) == 777
    assert m.servo_id == m.get(Register.ID) == 3
    assert (m.get(Register.Firmware_Major_Version), m.get(Register.Firmware_Minor_Version)) == (3, 10)
    assert m.get(Register.Return_Delay_Time) == 250
    assert m.get(Register.Response_Status_Level) == 1
    assert (m.get(Register.Min_Position_Limit), m.get(Register.Max_Position_Limit)) == (0, 4095)
    assert (m.get(Register.P_Coefficient), m.get(Register.D_Coefficient), m.get(Register.I_Coefficient)) == (32, 32, 0)
    assert m.get(Register.Max_Torque_Limit) == m.get(Register.Torque_Limit) == 1000
    assert m.get(Register.Lock) == 0 and m.get(Register.Torque_Enable) == 0
    assert m.read(Register.Model_Number.address, 2) == b"\x09\x03"
    assert sorted(make_servos()) == [1, 2, 3, 4, 5, 6]


def test_read_bounds() -> None:
    m = ServoMemory()
    assert len(m.read(0, TABLE_SIZE)) == TABLE_SIZE
    with pytest.raises(ValueError):
        m.read(250, 10)
    assert m.write(255, b"\x00\x00") is False


def test_read_only_registers_ignore_host_writes() -> None:
    m = ServoMemory()
    m.set_encoder(1000)
    host_write(m, Register.Present_Position, 5)
    host_write(m, Register.Model_Number, 1)
    assert m.get(Register.Present_Position) == 1000
    assert m.get(Register.Model_Number) == 777


def test_eeprom_write_with_lock_open_is_saved() -> None:
    m = ServoMemory()
    host_write(m, Register.Lock, 0)
    host_write(m, Register.Max_Position_Limit, 3000)
    m.power_cycle()
    assert m.get(Register.Max_Position_Limit) == 3000


def test_eeprom_write_with_lock_closed_takes_effect_until_power_cycle() -> None:
    m = ServoMemory()
    host_write(m, Register.Lock, 1)
    host_write(m, Register.Max_Position_Limit, 3000)
    assert m.get(Register.Max_Position_Limit) == 3000
    m.power_cycle()
    assert m.get(Register.Max_Position_Limit) == 4095
    assert m.get(Register.Lock) == 0  # SRAM back to factory


def test_strict_lock_ignores_locked_eeprom_writes() -> None:
    m = ServoMemory(strict_eeprom_lock=True)
    host_write(m, Register.Lock, 1)
    host_write(m, Register.Max_Position_Limit, 3000)
    host_write(m, Register.ID, 9)
    assert m.get(Register.Max_Position_Limit) == 4095
    assert m.servo_id == 1
    host_write(m, Register.Goal_Position, 100)  # SRAM still writable
    assert m.get(Register.Goal_Position) == 100


def test_id_and_baud_checks() -> None:
    m = ServoMemory()
    host_write(m, Register.ID, 254)
    assert m.servo_id == 1
    host_write(m, Register.ID, 7)
    assert m.servo_id == 7
    host_write(m, Register.Baud_Rate, 8)
    assert m.baudrate_index == 0
    host_write(m, Register.Baud_Rate, 4)
    assert m.baudrate_index == 4


def test_homing_offset_sign_magnitude_and_present_position() -> None:
    m = ServoMemory()
    m.set_encoder(3000)
    host_write(m, Register.Homing_Offset, -100)
    assert m.read(Register.Homing_Offset.address, 2) == (100 | 1 << 11).to_bytes(2, "little")
    assert m.get(Register.Present_Position) == 3100
    host_write(m, Register.Homing_Offset, 1000)
    assert m.get(Register.Present_Position) == 2000
    m.set_encoder(500)  # 500 - 1000 wraps within the turn
    assert m.get(Register.Present_Position) == 3596
    m.set_encoder(4096 + 1200)
    assert m.actual_position == 1200


def test_partial_write_of_homing_offset_high_byte() -> None:
    m = ServoMemory()
    m.set_encoder(2048)
    assert m.write(Register.Homing_Offset.address + 1, b"\x08")  # sign bit only: -0
    assert m.get(Register.Homing_Offset) == 0
    assert m.write(Register.Homing_Offset.address, b"\x0a")  # low byte
    assert m.get(Register.Homing_Offset) == -10
    assert m.get(Register.Present_Position) == 2058


def test_torque_enable_128_sets_mid() -> None:
    m = ServoMemory()
    m.set_encoder(3500)
    host_write(m, Register.Lock, 1)
    host_write(m, Register.Torque_Enable, 128)
    assert m.get(Register.Present_Position) == 2048
    assert m.get(Register.Torque_Enable) == 0
    m.power_cycle()
    assert m.get(Register.Homing_Offset) == 3500 - 2048  # saved whatever the lock


def test_factory_reset_keeps_id() -> None:
    m = ServoMemory(5)
    host_write(m, Register.P_Coefficient, 16)
    host_write(m, Register.Goal_Position, 1234)
    m.factory_reset()
    assert m.servo_id == 5
    assert m.get(Register.P_Coefficient) == 32
    assert m.get(Register.Goal_Position) == 0
    assert m.saved_eeprom == m.read(0, EEPROM_END)


def test_feedback_clamped_and_encoded() -> None:
    m = ServoMemory()
    m.set_feedback(velocity=-300, load=-2000, voltage=121, temperature=40, current=55, moving=True, status=0x20)
    assert m.get(Register.Present_Velocity) == -300
    assert m.read(Register.Present_Velocity.address, 2) == (300 | 1 << 15).to_bytes(2, "little")
    assert m.get(Register.Present_Load) == -1023  # clamped below the sign bit 10
    assert (m.get(Register.Present_Voltage), m.get(Register.Present_Temperature)) == (121, 40)
    assert (m.get(Register.Present_Current), m.get(Register.Moving), m.get(Register.Status)) == (55, 1, 0x20)
    m.set_feedback(voltage=-5)
    assert m.get(Register.Present_Voltage) == 0


def test_posted_feedback_reads_as_written_feedback_and_a_value_set_otherwise_stays_until_the_firmware_changes_it() -> None:
    m = ServoMemory()
    host_write(m, Register.Homing_Offset, 100)
    m.post_feedback(1100, -299.6, -2000.4, 120.6, 39.5, 54.7, True, 0)
    block = m.read(Register.Present_Position.address, 15)  # the bus server's feedback read
    assert int.from_bytes(block[:2], "little") == 1000  # the encoder less the homing offset
    assert (m.get(Register.Present_Velocity), m.get(Register.Present_Load)) == (-300, -1023)
    assert (m.get(Register.Present_Voltage), m.get(Register.Present_Temperature)) == (121, 40)
    assert (m.get(Register.Present_Current), m.get(Register.Moving), m.get(Register.Status)) == (55, 1, 0)
    assert m.actual_position == 1100
    m.set_feedback(status=0x04)  # set by other means (a test's fault, a tool)
    m.post_feedback(1101, -299.6, -2000.4, 120.6, 39.5, 54.7, True, 0)  # the firmware's status unchanged
    assert m.get(Register.Status) == 0x04 and m.get(Register.Present_Position) == 1001
    m.post_feedback(1101, -299.6, -2000.4, 120.6, 39.5, 54.7, True, 0x20)
    assert m.get(Register.Status) == 0x20
    # the posts before a write are in the table before the write applies: a mid-position calibration reads them
    m.post_feedback(3000, 0.0, 0.0, 120.0, 25.0, 0.0, False, 0)
    host_write(m, Register.Torque_Enable, 128)
    assert m.get(Register.Homing_Offset) == 3000 - 2048 and m.get(Register.Present_Position) == 2048


def test_settings_version_counts_every_change_of_the_table_the_firmware_reads() -> None:
    m = ServoMemory()
    versions = [m.settings_version]
    host_write(m, Register.Goal_Position, 1234)
    versions.append(m.settings_version)
    m.set(Register.Torque_Enable, 1)
    versions.append(m.settings_version)
    m.factory_reset()
    versions.append(m.settings_version)
    m.power_cycle()
    versions.append(m.settings_version)
    assert versions == sorted(set(versions)), versions  # each change bumped it
    m.post_feedback(1000, 0.0, 0.0, 120.0, 25.0, 0.0, False, 0)
    m.read(0, TABLE_SIZE)
    assert m.settings_version == versions[-1]  # feedback is no setting


def test_overrides_and_set_validation() -> None:
    m = ServoMemory(overrides={Register.Firmware_Minor_Version: 9, Register.Return_Delay_Time: 0})
    assert m.get(Register.Firmware_Minor_Version) == 9
    assert m.get(Register.Return_Delay_Time) == 0
    with pytest.raises(ValueError):
        m.set(Register.Homing_Offset, 5000)


def test_concurrent_feedback_and_block_reads_stay_consistent() -> None:
    """The physics thread writes position and velocity together; a block read sees both or neither."""
    m = ServoMemory()
    stop = threading.Event()

    def physics() -> None:
        k = 0
        while not stop.is_set():
            k = (k + 1) % 1000
            with m.lock:
                m.set_encoder(k)
                m.set_feedback(velocity=k)

    thread = threading.Thread(target=physics)
    thread.start()
    try:
        for _ in range(2000):
            block = m.read(Register.Present_Position.address, 4)
            assert int.from_bytes(block[:2], "little") == int.from_bytes(block[2:], "little")
    finally:
        stop.set()
        thread.join()
