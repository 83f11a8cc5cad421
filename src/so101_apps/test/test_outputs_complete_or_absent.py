"""Every output is complete at its name or absent (issue 19 §5): Ctrl-C in the middle of ``so101 replay
--format sage`` (main: a complete-looking folder with part of the rows, which ``pair`` accepted), a full disk
under a replay bag (main: a 0-byte .mcap) and under a fit report (main: a partial fit_report.json)."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from so101_testing import run_cli, wait_for

FIXTURES = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
MOTION = FIXTURES / "motion_files" / "so101" / "custom" / "actuator_bandwidth.txt"
SAGE = FIXTURES / "output" / "real" / "so101" / "custom"
REPLAY_CLI = "so101_sim2real.cli.replay"

# The replay CLI in a child process whose SAGE writer stops in the middle of state_motor.csv (its 1000th list
# field: control.csv has 150 rows, state_motor.csv 597 × 3 fields), says so in a file, and waits for a signal.
CHILD = textwrap.dedent("""
    import signal, sys
    from pathlib import Path
    from so101_common import sage
    from so101_testing import run_cli

    list_text, calls = sage._list_text, [0]

    def list_text_pausing_once(row):
        calls[0] += 1
        if calls[0] == 1000:
            Path(sys.argv[1]).touch()
            signal.pause()
        return list_text(row)

    sage._list_text = list_text_pausing_once
    sys.exit(run_cli("so101_sim2real.cli.replay", sys.argv[2:]))
""")


def test_ctrl_c_in_the_middle_of_a_sage_output_leaves_nothing_at_its_name(tmp_path: Path) -> None:
    out, paused = tmp_path / "sim" / "actuator_bandwidth", tmp_path / "paused"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(paused), "--motion", str(MOTION), "--out", str(out),
                              "--format", "sage"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: paused.exists() or child.poll() is not None, timeout=60)
        assert child.poll() is None, child.communicate()[0].decode()
        child.send_signal(signal.SIGINT)
        output = child.communicate(timeout=60)[0].decode()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0 and "KeyboardInterrupt" in output
    assert not out.exists()  # main: control.csv and a part of state_motor.csv here
    assert list(out.parent.iterdir()) == []  # and no temporary left behind


def test_a_full_disk_under_a_replay_bag_leaves_no_bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from so101_recorder import bag_writer

    written = [0]
    real_write = bag_writer._Output.write

    def write_until_full(self: Any, data: bytes | memoryview) -> int:
        written[0] += len(data)
        if written[0] > 20_000:  # the disk fills up after 20 kB of the bag
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, data)

    monkeypatch.setattr(bag_writer._Output, "write", write_until_full)
    out = tmp_path / "sim_bag"
    assert run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "cannot write sim bag" in err and "No space left" in err
    assert list(tmp_path.iterdir()) == []  # main: a bag folder with a partial .mcap and episode.yaml


def test_a_full_disk_under_a_fit_report_leaves_no_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from so101_apps import fit_profile as fit_profile_cli
    from so101_virtual.sysid import report as sysid_report

    def plot_on_a_full_disk(path: Path, *_: Any) -> None:
        path.write_bytes(b"\x89PNG")  # a few bytes reach the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sysid_report, "_plot", plot_on_a_full_disk)
    parser = argparse.ArgumentParser()
    fit_profile_cli.add_arguments(parser)
    out, report = tmp_path / "my_arm.yaml", tmp_path / "report"
    args = parser.parse_args(["--sage-real", str(SAGE), "--base", "unfitted", "--out", str(out), "--report", str(report),
                              "--holdout", "single_joint_elbow", "--window", "2", "--iterations", "1",
                              "--arm-parameters", "--joint-parameters", "coulomb_friction"])
    with pytest.raises(OSError, match="No space left"):
        fit_profile_cli.run(args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_arm.yaml"]  # the profile, complete; no report
