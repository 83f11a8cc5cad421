"""FaultInjector: each fault as the real scservo_sdk sees it over a pty, the control socket, and the
injector's own bookkeeping."""

from collections.abc import Iterator

import pytest
import scservo_sdk as scs

from so101_feetech.control_table import FEEDBACK_BLOCK, Register
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultCommandError, FaultControlServer, FaultInjector, send_fault_command
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import make_servos

IDS = (1, 2, 3, 4, 5, 6)


class PatientPort(scs.PortHandler):
    """scservo_sdk's PortHandler with a 200 ms packet-timeout floor (LeRobot patches this timeout
    too): the semantics under test stay the same, and a heavily loaded CI machine that does not
    schedule the bus thread within the SDK's default ~34 ms cannot turn a reply into a timeout."""

    def setPacketTimeout(self, packet_length: int) -> None:
        super().setPacketTimeout(packet_length)
        self.packet_timeout: float = max(self.packet_timeout, 200.0)


@pytest.fixture
def sdk() -> Iterator[tuple[FaultInjector, scs.PortHandler, scs.protocol_packet_handler]]:
    faults = FaultInjector(seed=1)
    with PtyLink(BusServer(make_servos(IDS), faults, BusTiming.fast())) as link:
        port = PatientPort(link.device_path)
        assert port.openPort()
        try:
            yield faults, port, scs.PacketHandler(0)
        finally:
            port.closePort()


def sync_read(port: scs.PortHandler, ph: scs.protocol_packet_handler, ids=IDS) -> int:
    group = scs.GroupSyncRead(port, ph, *FEEDBACK_BLOCK)
    for servo_id in ids:
        group.addParam(servo_id)
    return group.txRxPacket()


def test_dropped_reply_is_a_timeout_then_recovers(sdk) -> None:
    faults, port, ph = sdk
    faults.drop_next(2)
    assert ph.read1ByteTxRx(port, 1, 0)[1] == scs.COMM_RX_TIMEOUT
    assert ph.write1ByteTxRx(port, 1, Register.Acceleration.address, 9) == (scs.COMM_RX_TIMEOUT, 0)
    assert ph.read1ByteTxRx(port, 1, Register.Acceleration.address) == (9, scs.COMM_SUCCESS, 0)  # write applied


def test_corrupt_reply_is_rx_corrupt(sdk) -> None:
    faults, port, ph = sdk
    faults.corrupt_next(1)
    assert ph.ping(port, 2)[1] == scs.COMM_RX_CORRUPT
    assert ph.ping(port, 2) == (777, scs.COMM_SUCCESS, 0)
    faults.corrupt_next(1)
    assert sync_read(port, ph) == scs.COMM_RX_CORRUPT


def test_unplugged_servo(sdk) -> None:
    faults, port, ph = sdk
    faults.unplug(3)
    assert ph.ping(port, 3)[1] == scs.COMM_RX_TIMEOUT
    assert ph.write2ByteTxRx(port, 3, Register.Goal_Position.address, 100)[0] == scs.COMM_RX_TIMEOUT
    assert sync_read(port, ph) == scs.COMM_RX_TIMEOUT
    assert sync_read(port, ph, ids=(1, 2, 4, 5, 6)) == scs.COMM_SUCCESS
    faults.plug(3)
    assert ph.read2ByteTxRx(port, 3, Register.Goal_Position.address) == (0, scs.COMM_SUCCESS, 0)  # never heard it
    assert sync_read(port, ph) == scs.COMM_SUCCESS


@pytest.mark.parametrize("bit", [0, 2, 5])
def test_error_bits_visible_to_the_sdk(sdk, bit: int) -> None:
    faults, port, ph = sdk
    faults.force_error_bits(4, 1 << bit)
    model, comm, error = ph.ping(port, 4)
    assert (model, comm, error) == (777, scs.COMM_SUCCESS, 1 << bit)
    assert ph.getRxPacketError(error)  # the SDK names it
    assert ph.read1ByteTxRx(port, 4, Register.Status.address) == (1 << bit, scs.COMM_SUCCESS, 1 << bit)
    faults.clear()
    assert ph.ping(port, 4) == (777, scs.COMM_SUCCESS, 0)


def test_drop_fraction_is_seeded_and_roughly_right() -> None:
    def fates(seed: int) -> list[str]:
        faults = FaultInjector(seed=seed)
        faults.drop_fraction(0.25)
        return [faults.reply_fate() for _ in range(2000)]

    assert fates(7) == fates(7)
    assert 400 < fates(7).count("drop") < 600


def test_corrupt_fraction_and_clear() -> None:
    faults = FaultInjector(seed=3)
    faults.corrupt_fraction(1.0)
    assert faults.reply_fate() == "corrupt"
    faults.clear()
    assert faults.reply_fate() == "ok"


def test_voltage_sag_is_data_for_the_physics() -> None:
    faults = FaultInjector()
    faults.set_voltage_sag(1.5)
    faults.set_voltage_sag(0.5, servo_id=2)
    assert faults.voltage_sag() == 1.5
    assert faults.voltage_sag(2) == 2.0
    assert faults.voltage_sag(3) == 1.5


def test_validation() -> None:
    faults = FaultInjector()
    for bad in (
        lambda: faults.drop_fraction(1.5),
        lambda: faults.drop_next(-1),
        lambda: faults.force_error_bits(1, 0x80),
    ):
        with pytest.raises(ValueError):
            bad()


def test_control_socket(tmp_path) -> None:
    faults = FaultInjector()
    path = str(tmp_path / "faults.sock")
    with FaultControlServer(faults, path):
        send_fault_command(path, {"op": "unplug", "ids": [2, 3]})
        send_fault_command(path, {"op": "error_bits", "id": 1, "bits": 32})
        send_fault_command(path, {"op": "voltage_sag", "volts": 2.0})
        send_fault_command(path, {"op": "drop_next", "count": 2})
        send_fault_command(path, {"op": "heat", "id": 4, "celsius": 65})
        state = send_fault_command(path, {"op": "extra_latency", "seconds": 0.001})
        assert faults.unplugged() == {2, 3} and faults.error_bits(1) == 32 and faults.voltage_sag() == 2.0
        assert state["drop_next"] == 2 and state["extra_latency"] == 0.001 and state["heat_pending"] == {"4": 65.0}
        assert faults.take_heat() == {4: 65.0} and faults.take_heat() == {}  # the physics takes it once
        with pytest.raises(FaultCommandError, match="unknown op"):
            send_fault_command(path, {"op": "explode"})
        with pytest.raises(FaultCommandError, match="fraction"):
            send_fault_command(path, {"op": "drop_fraction", "fraction": 3})
        assert send_fault_command(path, {"op": "clear"})["unplugged"] == []
    assert not (tmp_path / "faults.sock").exists()


def test_control_socket_refuses_to_replace_a_file(tmp_path) -> None:
    path = tmp_path / "not_a_socket"
    path.write_text("x")
    with pytest.raises(FileExistsError):
        FaultControlServer(FaultInjector(), str(path))
