"""SAGE I/O against the shipped real-data fixture (cut from SAGE's own recordings)."""

from __future__ import annotations

import ast
import csv
import filecmp
from pathlib import Path

import numpy as np
import pytest

from so101_common import sage
from so101_common.joints import GRIPPER, JOINT_NAMES, gripper_fraction_to_rad

FIXTURE = Path(__file__).parent / "fixtures" / "sage"
REAL_ROOT = FIXTURE / "output" / "real" / "so101" / "custom"
MOTIONS = ("actuator_bandwidth", "prbs_excitation", "single_joint_elbow")


@pytest.mark.parametrize("motion", MOTIONS)
def test_run_round_trip_is_byte_identical(motion: str, tmp_path: Path) -> None:
    run = sage.read_run(REAL_ROOT / motion)
    out = tmp_path / "output" / "real" / "so101" / "custom" / motion
    sage.write_run(run, out)
    for name in ("joint_list.txt", "control.csv", "state_motor.csv", "event.csv"):
        assert filecmp.cmp(REAL_ROOT / motion / name, out / name, shallow=False), name
    again = sage.read_run(out)
    np.testing.assert_array_equal(again.state_position, run.state_position)
    np.testing.assert_array_equal(again.state_torque, run.state_torque)
    assert again.events == run.events


def test_read_run_matches_an_independent_parse() -> None:
    run = sage.read_run(REAL_ROOT / "actuator_bandwidth")
    with open(REAL_ROOT / "actuator_bandwidth" / "state_motor.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert run.kind == "real" and len(run.state_time) == len(rows) == 150
    np.testing.assert_array_equal(run.state_time, [float(r["timestamp"]) for r in rows])
    np.testing.assert_array_equal(run.state_velocity, [ast.literal_eval(r["velocities"]) for r in rows])
    assert run.event_time("MOTION_START") == pytest.approx(float(rows[0]["timestamp"]) * 1e-6)
    assert run.event_time("NOT_THERE") is None


def test_trajectories_are_si_in_ros_order_and_convert_back() -> None:
    run = sage.read_run(REAL_ROOT / "prbs_excitation")
    command, state = sage.run_to_trajectories(run)
    assert command.names == JOINT_NAMES
    np.testing.assert_allclose(state.time, run.state_time * 1e-6)
    np.testing.assert_allclose(state.position[:, 5], [gripper_fraction_to_rad(v) for v in run.state_position[:, 5]])
    np.testing.assert_allclose(state.velocity[:, 5], run.state_velocity[:, 5] * GRIPPER.span)
    np.testing.assert_array_equal(state.position[:, :5], run.state_position[:, :5])
    back = sage.run_from_trajectories(command, state, "real", [(n, t * 1e-6) for n, t in run.events])
    np.testing.assert_allclose(back.state_position, run.state_position, atol=1e-12)
    np.testing.assert_allclose(back.state_velocity, run.state_velocity, atol=1e-12)
    np.testing.assert_allclose(back.control_time, run.control_time, rtol=1e-15)


def test_sim_run_written_from_trajectories_reads_back_in_seconds(tmp_path: Path) -> None:
    command, state = sage.run_to_trajectories(sage.read_run(REAL_ROOT / "single_joint_elbow"))
    folder = tmp_path / "output" / "sim" / "so101" / "custom" / "single_joint_elbow"
    sage.write_run(sage.run_from_trajectories(command.shifted(-command.time[0]), state.shifted(-state.time[0]),
                                              "sim"), folder)
    again = sage.read_run(folder)
    assert again.kind == "sim" and not (folder / "event.csv").exists()
    assert again.state_time[0] == 0.0 and again.state_time[-1] < 4.0
    _, state2 = sage.run_to_trajectories(again)
    np.testing.assert_allclose(state2.position, state.position, atol=1e-12)


def test_motion_file_round_trip_is_text_identical(tmp_path: Path) -> None:
    source = FIXTURE / "motion_files" / "so101" / "custom" / "actuator_bandwidth.txt"
    motion = sage.read_motion_file(source)
    assert len(motion) == 150 and motion.time[1] == pytest.approx(0.02)
    assert motion.position[0, 5] == pytest.approx(gripper_fraction_to_rad(0.455))
    sage.write_motion_file(motion, tmp_path / "m.txt")
    assert (tmp_path / "m.txt").read_text() == source.read_text()


def test_real_command_equals_its_motion_file() -> None:
    motion = sage.read_motion_file(FIXTURE / "motion_files" / "so101" / "custom" / "prbs_excitation.txt")
    command, _ = sage.run_to_trajectories(sage.read_run(REAL_ROOT / "prbs_excitation"))
    np.testing.assert_allclose(command.position, motion.position, atol=1e-12)


def test_list_motion_runs() -> None:
    assert [p.name for p in sage.list_motion_runs(REAL_ROOT)] == sorted(MOTIONS)
    assert sage.list_motion_runs(REAL_ROOT / "prbs_excitation") == [REAL_ROOT / "prbs_excitation"]


def test_bad_inputs_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(sage.SageFormatError, match="does not exist"):
        sage.read_run(tmp_path / "nope", kind="real")
    with pytest.raises(sage.SageFormatError, match="real or a sim"):
        sage.read_run(tmp_path)
    bad = tmp_path / "output" / "real" / "so101" / "custom" / "m"
    sage.write_run(sage.read_run(REAL_ROOT / "prbs_excitation"), bad)
    text = (bad / "state_motor.csv").read_text().splitlines()
    (bad / "state_motor.csv").write_text("\n".join(text[:3] + [text[3].replace("[", "[1.0, ", 1)]) + "\n")
    with pytest.raises(sage.SageFormatError, match="6 values"):
        sage.read_run(bad)
    (bad / "control.csv").write_text("type,time,positions\n")
    with pytest.raises(sage.SageFormatError, match="header"):
        sage.read_run(bad)
    (tmp_path / "m.txt").write_text("Rotation,Pitch,Elbow,Wrist_Pitch,Wrist_Roll,Hand\n0,0,0,0,0,0\n")
    with pytest.raises(sage.SageFormatError, match="Hand"):
        sage.read_motion_file(tmp_path / "m.txt")
