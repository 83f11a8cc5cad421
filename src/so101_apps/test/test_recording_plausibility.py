"""Implausible recordings are refused before anything is simulated or fitted (issue 19 §5): a SAGE run with a
+1e12 µs jump (main: a 1.5 GiB replay, a 16,667-minute fit), a motion in degrees (main: sim states of 33 rad),
a first row of 1e308 (main: a frozen sim, MuJoCo's warning only in ./MUJOCO_LOG.TXT)."""

from __future__ import annotations

import argparse
import csv
import logging
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from so101_apps import fit_profile as fit_profile_cli
from so101_common import sage
from so101_common.trajectory import JointTrajectory
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimError
from so101_testing import run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
REAL_RUN = FIXTURES / "output" / "real" / "so101" / "custom" / "prbs_excitation"
MOTION = FIXTURES / "motion_files" / "so101" / "custom" / "actuator_bandwidth.txt"
REPLAY_CLI = "so101_sim2real.cli.replay"
JUMP_ROW = 60  # data row (0-based) from which the stamps are 1e12 µs later: file line 62


def jumped_run(tmp_path: Path) -> Path:
    """The fixture's real run with every stamp from row JUMP_ROW on moved 1e12 µs (11.6 days) later."""
    run = tmp_path / "output" / "real" / "so101" / "custom" / "prbs_excitation"
    shutil.copytree(REAL_RUN, run)
    for name in ("control.csv", "state_motor.csv"):
        with (run / name).open(newline="") as handle:
            rows = list(csv.reader(handle))
        for row in rows[1 + JUMP_ROW:]:
            row[1] = repr(float(row[1]) + 1e12)
        with (run / name).open("w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    return run


def motion_scaled(tmp_path: Path, scale: float, first_row: str | None = None) -> Path:
    lines = MOTION.read_text().splitlines()
    rows = [",".join(f"{float(v) * scale:.6f}" for v in line.split(",")) for line in lines[1:]]
    path = tmp_path / "motion.txt"
    path.write_text("\n".join([lines[0], *([first_row] if first_row else []), *rows]) + "\n")
    return path


def errors(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]


def test_a_sage_run_with_a_time_jump_is_refused_where_the_jump_is(tmp_path: Path) -> None:
    run = jumped_run(tmp_path)
    with pytest.raises(sage.SageFormatError) as err:
        sage.read_run(run, kind="real")
    assert str(err.value).startswith(f"{run / 'control.csv'}: time jumps by 1e+06 s from line {JUMP_ROW + 1} to "
                                     f"line {JUMP_ROW + 2}")


def test_replay_and_fit_profile_stop_at_the_jump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = jumped_run(tmp_path)
    out = tmp_path / "sim"
    assert run_cli(REPLAY_CLI, ["--sage-real", str(run), "--out", str(out)]) == 1
    lines = errors(capsys)
    assert len(lines) == 1 and lines[0].startswith(f"so101 replay: error: {run / 'control.csv'}: time jumps by 1e+06 s")
    assert not out.exists()
    parser = argparse.ArgumentParser()
    fit_profile_cli.add_arguments(parser)
    profile = tmp_path / "fitted.yaml"
    assert fit_profile_cli.run(parser.parse_args(["--sage-real", str(run), "--out", str(profile), "--iterations", "1"])) == 1
    printed = capsys.readouterr().err.strip().splitlines()
    assert len(printed) == 1, printed
    assert printed[0].startswith(f"so101 fit-profile: error: {run / 'control.csv'}: time jumps by 1e+06 s from line "
                                 f"{JUMP_ROW + 1} to line {JUMP_ROW + 2} (")
    assert printed[0].endswith("→ 1e+06 s; at most 60 s between samples): a corrupt or spliced recording; cut it at the jump")
    assert not profile.exists()


def test_a_motion_in_degrees_is_refused_with_a_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    motion = motion_scaled(tmp_path, 180 / math.pi)
    assert run_cli(REPLAY_CLI, ["--motion", str(motion), "--out", str(tmp_path / "sim")]) == 1
    lines = errors(capsys)
    assert len(lines) == 1 and "which cannot be radians" in lines[0] and "degrees" in lines[0], lines
    assert not (tmp_path / "sim").exists()


def test_a_first_row_of_1e308_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    motion = motion_scaled(tmp_path, 1.0, first_row=",".join(["1e308"] * 6))
    assert run_cli(REPLAY_CLI, ["--motion", str(motion), "--out", str(tmp_path / "sim")]) == 1
    assert errors(capsys) == [f"so101 replay: error: {motion}: line 2: shoulder_pan = 1e+308, which cannot be radians "
                              "for this joint (its range is [-1.92, 1.92] rad); not a joint angle in radians"]


def test_mujoco_instability_is_an_error_and_its_warning_reaches_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)  # MuJoCo's own handler would write ./MUJOCO_LOG.TXT here
    time = np.arange(50) * 0.02
    position = np.zeros((50, 6))
    start = np.array([1e308, 0, 0, 0, 0, 0])  # past every check of the readers: straight into the simulator
    with caplog.at_level(logging.WARNING), pytest.raises(MujocoSimError) as err:
        MujocoSim().simulate(JointTrajectory(time, position), start)
    assert "became unstable between t=0.000" in str(err.value) and "on shoulder_pan" in str(err.value)
    assert any(r.getMessage().startswith("MuJoCo: Nan, Inf or huge value in QPOS") for r in caplog.records)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
