"""``so101 virtual-bus``: a separate process serving the arm on a linked pty, run-time faults through
its control socket, clean stop on SIGINT/SIGTERM, calibration files, and its errors."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import pytest
import scservo_sdk as scs

from so101_feetech.calibration import load_calibration
from so101_testing import NodeProcess, run_cli, wait_for
from so101_virtual import cli
from so101_virtual.faults import send_fault_command
from so101_virtual.lag import read_status_file

CONFIG = Path(__file__).resolve().parents[3] / "config" / "calibration"


def ping(device: str, servo_id: int, tries: int = 5) -> int:
    """The SDK's ping; retried, as a loaded machine may miss the SDK's ~35 ms deadline now and then."""
    port = scs.PortHandler(device)
    assert port.openPort() and port.setBaudRate(1_000_000)
    try:
        for _ in range(tries):
            try:
                _, result, _ = scs.PacketHandler(0).ping(port, servo_id)
            except IndexError:  # the SDK took a late reply to an earlier try for its model-number read
                result = scs.COMM_RX_CORRUPT
            if result == scs.COMM_SUCCESS:
                break
            time.sleep(0.05)  # let a late reply arrive, then drop it
            port.clearPort()
        return result
    finally:
        port.closePort()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serves_until_signalled(tmp_path, sig):
    link = tmp_path / "so101_follower"
    sock = tmp_path / "faults.sock"
    status = tmp_path / "status.json"
    args = ["--link", str(link), "--faults-socket", str(sock), "--profile", "laggy_bus", "--status-file", str(status)]
    with NodeProcess("so101_virtual.cli", args) as proc:
        assert wait_for(lambda: "device /dev/pts/" in proc.output() or not proc.alive(), timeout=30), proc.output()
        line = next(x for x in proc.output().splitlines() if x.startswith("device "))
        device = line.split()[1]
        assert line == f"device {device} link {link}"
        assert os.path.realpath(link) == device
        assert ping(str(link), 1) == scs.COMM_SUCCESS
        send_fault_command(str(sock), {"op": "unplug", "id": 3})
        assert ping(str(link), 3, tries=1) == scs.COMM_RX_TIMEOUT
        send_fault_command(str(sock), {"op": "clear"})
        assert ping(str(link), 3) == scs.COMM_SUCCESS
        assert wait_for(lambda: status.exists() and read_status_file(status).total_s > 0, timeout=10), proc.output()
        running = read_status_file(status).total_s
        assert proc.stop(sig=sig) == 0, proc.output()
    assert read_status_file(status).total_s >= running  # the last word, written on the way out
    assert "behind wall time for" in proc.log_path.read_text()
    assert not link.exists() and not link.is_symlink()
    assert not sock.exists()
    assert proc.log_path.read_text().count("device /dev/pts/") == 1


def test_leader_role_with_a_motion_file(tmp_path):
    motion = tmp_path / "m.txt"
    motion.write_text("Rotation,Pitch,Elbow,Wrist_Pitch,Wrist_Roll,Jaw\n" + "0.1,0.0,0.5,0.0,0.0,0.5\n" * 10)
    link = tmp_path / "so101_leader"
    with NodeProcess("so101_virtual.cli", ["--link", str(link), "--role", "leader", "--motion", str(motion)]) as proc:
        assert wait_for(lambda: "device /dev/pts/" in proc.output() or not proc.alive(), timeout=30), proc.output()
        assert ping(str(link), 6) == scs.COMM_SUCCESS
        assert proc.stop() == 0


def test_write_calibration_through_the_so101_command(tmp_path, capsys):
    assert run_cli("so101_virtual.cli", ["--write-calibration", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for role in ("follower", "leader"):
        written = tmp_path / f"virtual_{role}.json"
        assert str(written) in out and written.is_file()  # written, and the path told to the user
        assert load_calibration(written) == load_calibration(CONFIG / f"virtual_{role}.json")
        assert written.read_text() == (CONFIG / f"virtual_{role}.json").read_text()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_errors_are_printed_once(tmp_path, capsys):
    assert cli.run(parse("--profile", "nonesuch")) == 1
    err = capsys.readouterr().err
    assert err.count("unknown gap profile 'nonesuch'") == 1
    assert cli.run(parse("--motion", str(tmp_path / "m.txt"))) == 2
    assert "--role leader" in capsys.readouterr().err
    assert cli.run(parse("--role", "leader", "--motion", str(tmp_path / "missing.txt"))) == 1
    assert "cannot read motion file" in capsys.readouterr().err
    degrees = tmp_path / "degrees.txt"  # a motion in degrees: refused before the arm moves
    degrees.write_text("Rotation,Pitch,Elbow,Wrist_Pitch,Wrist_Roll,Jaw\n" + "33.0,0.0,30.0,0.0,0.0,0.5\n" * 10)
    assert cli.run(parse("--role", "leader", "--motion", str(degrees))) == 1
    assert f"{degrees}: line 2: shoulder_pan = 33, which cannot be radians" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("joint_defaults: {backlash: -1}\n")
    assert cli.run(parse("--profile", str(bad))) == 1
    assert "joint_defaults.backlash" in capsys.readouterr().err
    assert cli.run(parse("--time-scale", "0")) == 2
