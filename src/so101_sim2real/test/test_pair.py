"""'so101 pair' on the shipped SAGE fixture against sim folders written with a known clock and plant."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from so101_common import sage
from so101_common.paired_dataset import PairedDataset
from so101_common.trajectory import JointTrajectory
from so101_sim2real.cli import pair as pair_cli

FIXTURE = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage"
REAL_ROOT = FIXTURE / "output" / "real" / "so101" / "custom"
SIM_DELAY = 0.04  # s, the fake sim plant follows its command 40 ms late
SIM_SAG = 0.01  # rad


def write_fake_sim(root: Path) -> Path:
    """A SAGE sim root: per motion, the motion's command replayed at 200 Hz, stamped in s from 0."""
    sim_root = root / "output" / "sim" / "so101" / "custom"
    for folder in sage.list_motion_runs(REAL_ROOT):
        command, _ = sage.run_to_trajectories(sage.read_run(folder))
        t = np.arange(0, command.time[-1] - command.time[0], 0.005)
        cmd = JointTrajectory(t, np.stack([np.interp(t, command.time - command.time[0], c)
                                           for c in command.position.T], 1))
        state = JointTrajectory(t, np.stack([np.interp(t - SIM_DELAY, t, c) for c in cmd.position.T], 1) - SIM_SAG,
                                np.zeros_like(cmd.position), np.full_like(cmd.position, -0.1))
        sage.write_run(sage.run_from_trajectories(cmd, state, "sim"), sim_root / folder.name)
    return sim_root


def pair_args(real: Path, sim: Path | str, out: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    pair_cli.add_arguments(parser)
    return parser.parse_args(["--real", str(real), "--sim", str(sim), "--out", str(out), *extra])


def test_pair_sage_roots_every_motion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim_root = write_fake_sim(tmp_path)
    assert pair_cli.run(pair_args(REAL_ROOT, sim_root, tmp_path / "ds")) == 0
    assert "wrote 3 episode(s)" in capsys.readouterr().out
    dataset = PairedDataset.load(tmp_path / "ds")
    assert [e.name for e in dataset] == ["actuator_bandwidth", "prbs_excitation", "single_joint_elbow"]
    for episode in dataset:
        real_run = sage.read_run(REAL_ROOT / episode.name)
        start, stop = real_run.event_time("MOTION_START"), real_run.event_time("DISABLE")
        assert start is not None and stop is not None
        # the sim clock's 0 is MOTION_START on the real clock; drift over 3 s is left unfitted noise
        assert episode.metadata["clock"]["offset"] == pytest.approx(start, abs=0.005)
        assert episode.metadata["clock"]["method"] == "command~command"
        assert episode.metadata["real_effort_unsigned"] is True
        assert episode.metadata["real"]["path"].endswith(episode.name)
        _, real_state = sage.run_to_trajectories(real_run)
        grid_start = episode.metadata["grid_start_real_clock_s"]
        command, _ = sage.run_to_trajectories(real_run)
        # on a command's stamp, the first at which both runs are there (the fake sim starts up to 5 ms late)
        assert np.min(np.abs(command.time - grid_start)) <= 0.003 and start - 0.003 <= grid_start <= start + 0.025
        t_real = grid_start + episode.time
        expected = np.stack([np.interp(t_real, real_state.time, c) for c in real_state.position.T], 1)
        np.testing.assert_allclose(episode.real_position, expected, atol=1e-9)
        expected_sim = np.stack([np.interp(t_real - SIM_DELAY, command.time, c) for c in command.position.T], 1)
        moving = episode.time > SIM_DELAY + 0.05
        np.testing.assert_allclose(episode.sim_position[moving], expected_sim[moving] - SIM_SAG, atol=0.01)
        np.testing.assert_allclose(episode.sim_effort, -0.1)
        assert episode.time[-1] <= stop - start + 1e-9


def test_pair_single_motion_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim_root = write_fake_sim(tmp_path)
    assert pair_cli.run(pair_args(REAL_ROOT / "prbs_excitation", sim_root / "prbs_excitation",
                                  tmp_path / "one", "--rate", "100", "--no-drift")) == 0
    one = PairedDataset.load(tmp_path / "one")
    assert one.rate_hz == 100.0 and len(one) == 1 and one.episodes[0].metadata["clock"]["drift"] == 0.0
    assert pair_cli.run(pair_args(REAL_ROOT, tmp_path / "missing", tmp_path / "x")) == 1
    assert "does not exist" in capsys.readouterr().err
    (sim_root / "prbs_excitation").rename(tmp_path / "elsewhere")
    assert pair_cli.run(pair_args(REAL_ROOT, sim_root, tmp_path / "x")) == 1
    assert "no sim run for motion 'prbs_excitation'" in capsys.readouterr().err


def test_one_command_from_a_sage_real_folder_to_a_mujoco_paired_dataset_and_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pair_cli.run(pair_args(REAL_ROOT / "single_joint_elbow", "mujoco", tmp_path / "ds",
                                  "--report", str(tmp_path / "report"))) == 0
    assert "report:" in capsys.readouterr().out
    episode = PairedDataset.load(tmp_path / "ds").episodes[0]
    assert episode.metadata["sim"]["format"] == "mujoco"
    # the MuJoCo replay starts from the real initial state and follows the same commands
    np.testing.assert_allclose(episode.sim_position[0], episode.real_position[0], atol=0.05)
    assert np.nanmax(np.abs(episode.sim_position - episode.real_position)) < 0.5
    page = (tmp_path / "report" / "report.html").read_text()
    assert "elbow_flex" in page and "data:image/png;base64," in page


def test_an_existing_dataset_is_kept_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``pair --out`` replaced an existing dataset silently (replay, export-lerobot and fit-profile refuse)."""
    out = tmp_path / "ds"
    assert pair_cli.run(pair_args(REAL_ROOT / "single_joint_elbow", "mujoco", out)) == 0
    before = (out / "dataset.json").read_bytes()
    assert pair_cli.run(pair_args(REAL_ROOT / "prbs_excitation", "mujoco", out)) == 1
    assert capsys.readouterr().err == f"so101 pair: error: {out} already exists; choose a new path or pass --force\n"
    assert (out / "dataset.json").read_bytes() == before
    assert pair_cli.run(pair_args(REAL_ROOT / "prbs_excitation", "mujoco", out, "--force")) == 0
    assert (out / "dataset.json").read_bytes() != before
