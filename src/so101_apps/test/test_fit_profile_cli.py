"""``so101 fit-profile``: loading SAGE runs and bags into recordings, the held-out split, a tiny
end-to-end fit on the repo's SAGE fixture, and one-line errors on bad input."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from so101_apps import fit_profile as fit_profile_cli
from so101_common import sage
from so101_common.joints import ARM_JOINT_NAMES
from so101_common.trajectory import JointTrajectory
from so101_sim2real.replay.core import ReplaySource, write_replay_bag
from so101_sim2real.replay.fit_recordings import load_bag_recordings, load_sage_recordings, split_holdout
from so101_virtual.profiles import load_profile
from so101_virtual.sysid.recording import RecordingError

SAGE = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage" / "output" / "real" / "so101" / "custom"


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    fit_profile_cli.add_arguments(parser)
    return fit_profile_cli.run(parser.parse_args(list(argv)))


def test_sage_runs_load_with_state_at_each_command():
    recordings = load_sage_recordings([SAGE])
    assert [r.name for r in recordings] == ["custom/actuator_bandwidth", "custom/prbs_excitation",
                                            "custom/single_joint_elbow"]
    command, state = sage.run_to_trajectories(sage.read_run(SAGE / "prbs_excitation", kind="real"))
    prbs = recordings[1]
    np.testing.assert_allclose(prbs.command, command.position)
    np.testing.assert_allclose(prbs.state, state.position)  # SAGE stamps state and command alike
    assert prbs.time[0] == 0.0


def test_holdout_every_nth_in_name_order_or_by_name():
    recordings = load_sage_recordings([SAGE])
    fit, held = split_holdout(recordings, every=2)
    assert [r.name for r in held] == ["custom/actuator_bandwidth", "custom/single_joint_elbow"]
    assert [r.name for r in fit] == ["custom/prbs_excitation"]
    fit, held = split_holdout(recordings, names=["prbs_excitation"])
    assert [r.name for r in held] == ["custom/prbs_excitation"] and len(fit) == 2
    assert split_holdout(recordings, every=0)[1] == []
    with pytest.raises(RecordingError, match="--holdout names no recording: nope"):
        split_holdout(recordings, names=["nope"])
    with pytest.raises(RecordingError, match="two recordings are named 'custom/prbs_excitation'"):
        split_holdout(recordings + load_sage_recordings([SAGE / "prbs_excitation"]))


def test_bag_state_is_interpolated_onto_command_stamps(tmp_path):
    t = np.arange(0, 2.0, 0.02)
    command = np.column_stack([np.sin(t + j) for j in range(6)])
    state_t = t + 0.01  # states half a frame after each command
    state = np.column_stack([np.sin(state_t - 0.1 + j) for j in range(6)])
    path = write_replay_bag(tmp_path / "episode", ReplaySource("episode", JointTrajectory(t, command), command[0]),
                            JointTrajectory(t, command), JointTrajectory(state_t, state),
                            command_topic="/joint_command", state_topic="/joint_states")
    (recording,) = load_bag_recordings([path])
    assert recording.name == "episode"
    np.testing.assert_allclose(recording.command, command)
    inside = slice(1, -1)
    np.testing.assert_allclose(recording.state[inside], np.column_stack([np.sin(t - 0.1 + j) for j in range(6)])[inside],
                               atol=2e-4)
    with pytest.raises(RecordingError, match="has no topic /measured"):
        load_bag_recordings([path], state_topic="/measured")


def test_tiny_fit_writes_a_profile_and_a_report(tmp_path, capsys):
    out, report = tmp_path / "my_arm.yaml", tmp_path / "report"
    rc = run_cli("--sage-real", str(SAGE), "--base", "unfitted", "--out", str(out), "--report", str(report),
                 "--holdout", "single_joint_elbow", "--window", "2", "--iterations", "1",
                 "--arm-parameters", "--joint-parameters", "coulomb_friction")
    printed = capsys.readouterr().out
    assert rc == 0, printed
    profile = load_profile(out)
    assert profile.name == "my_arm" and "fitted to 2 real recordings" in profile.description
    text = out.read_text()
    assert "# Reproduce: so101 fit-profile --sage-real" in text and "--holdout single_joint_elbow" in text
    assert "# Held out (not fitted on): custom/single_joint_elbow" in text
    data = json.loads((report / "fit_report.json").read_text())
    assert [row["joint"] for row in data["joints"]] == list(ARM_JOINT_NAMES)
    assert data["evaluated_on"] == ["custom/single_joint_elbow"]
    assert (report / "fit_report.png").stat().st_size > 0
    for joint in ARM_JOINT_NAMES:
        assert f"| {joint} |" in printed


@pytest.mark.parametrize(
    ("argv", "rc", "message"),
    [
        ((), 2, "give recordings to fit"),
        (("--sage-real", "/nonexistent/runs"), 1, "no SAGE run folders (with state_motor.csv) under /nonexistent/runs"),
        (("--sage-real", str(SAGE), "--base", "defualt"), 1, "unknown gap profile 'defualt' (did you mean 'default'?)"),
        (("--sage-real", str(SAGE), "--joint-parameters", "frictoin"), 1, "unknown fit parameter 'frictoin'"),
        (("--sage-real", str(SAGE), "--holdout", "nope"), 1, "--holdout names no recording: nope"),
        (("--sage-real", str(SAGE), "--holdout-every", "1"), 1, "every recording is held out"),
        (("--bag", "/nonexistent/bag"), 1, "cannot read bag /nonexistent/bag"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, rc, message):
    out = tmp_path / "p.yaml"
    assert run_cli(*argv, "--out", str(out)) == rc
    printed = capsys.readouterr().err
    assert printed.startswith("so101 fit-profile: error: ") and message in printed
    assert printed.count("\n") == 1 and not out.exists()


def test_existing_output_is_kept(tmp_path, capsys):
    out = tmp_path / "p.yaml"
    out.write_text("mine\n")
    assert run_cli("--sage-real", str(SAGE), "--out", str(out)) == 1
    assert "error: " in capsys.readouterr().err and out.read_text() == "mine\n"
