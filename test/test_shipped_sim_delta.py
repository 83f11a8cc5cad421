"""The judged path: ``so101 replay --sim mujoco --sage-real DIR --delta-model models/so101_sim_delta.onnx --format sage``.

Run on the repo's SAGE fixture excerpt of ``single_joint_elbow`` (a motion the shipped model was not
trained on: held out by the rule), read back with SAGE's own CSV layout, and compared with the real run.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from so101_bringup.share import models_dir
from so101_common.joints import JOINT_NAMES, SAGE_JOINT_NAMES, gripper_fraction_to_rad
from so101_gaponet.model_file import read_metadata
from so101_sim2real.sim_delta.recordings import split_heldout
from so101_testing import run_cli

SHIPPED_SIM_DELTA = models_dir() / "so101_sim_delta.onnx"  # as installed (share/so101_bringup/models)

FIXTURES = Path(__file__).resolve().parents[1] / "src" / "so101_common" / "test" / "fixtures" / "sage"
REAL_RUN = FIXTURES / "output" / "real" / "so101" / "custom" / "single_joint_elbow"


def _read(path: Path, time_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(time s, positions rad in SAGE order) straight from a SAGE CSV, not through so101_common.sage."""
    with path.open() as handle:
        rows = list(csv.DictReader(handle))
    time = np.array([float(r["timestamp"]) for r in rows]) * time_scale
    position = np.array([json.loads(r["positions"]) for r in rows])
    position[:, -1] = [gripper_fraction_to_rad(v) for v in position[:, -1]]
    return time, position


def test_shipped_model_is_a_sim_delta_model_not_trained_on_the_fixture_motion() -> None:
    meta = read_metadata(SHIPPED_SIM_DELTA)
    assert meta.role == "sim_delta" and meta.joints == JOINT_NAMES and meta.rate_hz == 50.0
    assert "single_joint_elbow" not in meta.provenance["motions"]
    assert "single_joint_elbow" in meta.provenance["heldout_motions"]


def test_replay_with_the_shipped_sim_delta_model(tmp_path: Path) -> None:
    plain, corrected = tmp_path / "plain", tmp_path / "delta"
    assert run_cli("so101_sim2real.cli.replay", ["--sim", "mujoco", "--sage-real", str(REAL_RUN), "--out", str(plain), "--format", "sage"]) == 0
    assert run_cli("so101_sim2real.cli.replay", ["--sim", "mujoco", "--sage-real", str(REAL_RUN), "--delta-model", str(SHIPPED_SIM_DELTA),
                  "--out", str(corrected), "--format", "sage"]) == 0
    assert list(SAGE_JOINT_NAMES) == (corrected / "joint_list.txt").read_text().split()
    real_time, real = _read(REAL_RUN / "state_motor.csv", 1e-6)
    command_time, command = _read(REAL_RUN / "control.csv", 1e-6)
    real_time, command_time = real_time - command_time[0], command_time - command_time[0]
    applied_time, applied = _read(corrected / "control.csv", 1.0)
    # one applied command per 20 ms tick: the held recorded command + Δ within the model's bounds, not all zero
    held = np.searchsorted(command_time, applied_time + 1e-9, side="right") - 1
    delta = applied - command[held]
    bounds = np.array(read_metadata(SHIPPED_SIM_DELTA).delta_bounds)  # SAGE's column order is the joint order
    assert np.all(np.abs(delta) <= bounds + 1e-9) and np.abs(delta).max() > 1e-3
    # the replay with Δ is closer to what the real arm did than the nominal replay (arm joints, pooled)
    errors = {}
    for name, folder in (("plain", plain), ("delta", corrected)):
        sim_time, sim = _read(folder / "state_motor.csv", 1.0)
        on_real = np.column_stack([np.interp(real_time, sim_time, sim[:, j]) for j in range(6)])
        errors[name] = np.sqrt(np.mean((on_real[:, :5] - real[:, :5]) ** 2))
    assert errors["delta"] < 0.8 * errors["plain"], errors


def test_heldout_rule_keeps_the_fixture_motion_out() -> None:
    from so101_sim2real.sim_delta.recordings import Recording

    names = read_metadata(SHIPPED_SIM_DELTA).provenance["motions"] + read_metadata(SHIPPED_SIM_DELTA).provenance["heldout_motions"]
    recordings = [Recording(n, np.arange(3.0), np.zeros((3, 6)), np.zeros((3, 6))) for n in names]
    _, heldout = split_heldout(recordings)
    assert sorted(r.name for r in heldout) == sorted(read_metadata(SHIPPED_SIM_DELTA).provenance["heldout_motions"])
