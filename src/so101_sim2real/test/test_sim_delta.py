"""Sim-delta training recovers a known gap: a 'real arm' that is MuJoCo itself behind 3 frames of lag and an offset.

The known answer: driving MuJoCo with ``a(t − 3) + offset`` reproduces the 'real' run exactly, so
the ideal Δ is ``a(t − 3) − a(t) + offset``. Trained on two motions, judged in closed loop on a
third one it never saw.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINTS
from so101_gaponet.metadata import Normalisation
from so101_gaponet.model_file import load_model, save_onnx, save_torchscript
from so101_gaponet.models import ArchConfig
from so101_gaponet.train import FitResult, normalised_tensors
from so101_sim2real.sim_delta.evaluate import evaluate
from so101_sim2real.sim_delta.features import (
    command_windows,
    history_rows,
    history_windows,
    play_offsets,
    previous_commands,
)
from so101_sim2real.sim_delta.filter import SimDeltaFilter
from so101_sim2real.sim_delta.recordings import Recording, split_heldout
from so101_sim2real.sim_delta.rollout import replay
from so101_sim2real.sim_delta.synthetic import known_delta, lagged_arm_recording
from so101_sim2real.sim_delta.trainer import DEFAULT_EPOCHS, SimDeltaConfig, metadata_for, train_sim_delta
from so101_testing import run_cli


@pytest.fixture(scope="module")
def motions() -> tuple[list[Recording], Recording]:
    return [lagged_arm_recording(f"train{i}", 20.0, i) for i in range(2)], lagged_arm_recording("unseen", 15.0, 7)


@pytest.mark.parametrize("arch", ["linear", "mlp"])
def test_training_recovers_a_known_lag_and_offset(motions, arch: str, tmp_path: Path) -> None:
    train, unseen = motions
    config = SimDeltaConfig(arch=arch, history=6, future_steps=2, hidden=32, epochs=None if arch == "linear" else 150,
                            sample_stride=1, seed=0)
    result = train_sim_delta(train, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_model(save_onnx(result.module, result.metadata, tmp_path / "sd.onnx"), role="sim_delta")
    assert model.metadata.role == "sim_delta" and model.metadata.future_steps == 2
    evaluation = evaluate([unseen], model.delta, model.metadata, reset_state=model.reset_state)
    # the nominal sim misses the lag and offset; with Δ the replay is close to the 'real' run on every joint
    assert np.all(evaluation.nominal > 0.005), evaluation.rows()
    floor = 0.8 if arch == "linear" else 0.6
    assert np.all(evaluation.cut_percent > 100 * floor), evaluation.rows()
    # and Δ itself is the known one (after the warm-up)
    recorder = SimDeltaFilter(model.delta, model.metadata, unseen.time, unseen.command, model.reset_state)
    replay(unseen, recorder)
    known = known_delta(unseen.command)
    applied = np.array(recorder.deltas)
    frames = min(len(applied), len(known))
    assert np.sqrt(np.mean((applied[20:frames] - known[20:frames]) ** 2)) < 0.01


def test_filter_builds_the_inputs_training_builds(motions) -> None:
    recording = motions[1]
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def spy(history: np.ndarray, commands: np.ndarray) -> np.ndarray:
        seen.append((history.copy(), commands.copy()))
        return np.zeros(len(JOINTS))

    norm_size = 3 * len(JOINTS)
    norm = Normalisation(history_mean=(0.0,) * norm_size, history_std=(1.0,) * norm_size, command_mean=(0.0,) * 6,
                         command_std=(1.0,) * 6, delta_mean=(0.0,) * 6, delta_std=(1.0,) * 6)
    config = SimDeltaConfig(history=4, future_steps=3)
    arch = ArchConfig(kind="linear", joints=6, history=4, features=3, future_steps=3)
    meta = metadata_for(FitResult(None, norm), arch, config, (0.1,) * 6, {})  # type: ignore[arg-type]
    run = replay(recording, SimDeltaFilter(spy, meta, recording.time, recording.command, lambda: None))
    # offline: the same rows from the replayed states and the nominal commands
    rows = history_rows(run.position, run.velocity, previous_commands(recording.command))
    windows, upcoming = history_windows(rows, 4), command_windows(recording.command, 3)
    assert len(seen) == len(recording.time)  # one call per 20 ms tick
    for i in (0, 1, 5, len(seen) // 2):
        np.testing.assert_allclose(seen[i][0], windows[i], atol=1e-9)
        np.testing.assert_allclose(seen[i][1], upcoming[i], atol=1e-12)


def test_heldout_rule_is_fixed_by_name_order() -> None:
    recordings = [Recording(f"m{i:02d}", np.arange(3.0), np.zeros((3, 6)), np.zeros((3, 6))) for i in (7, 3, 11, 0, 5, 9, 1)]
    train, heldout = split_heldout(recordings)
    # sorted m00 m01 m03 m05 m07 m09 m11: every fifth from the third -> m03 only, whatever the input order
    assert [r.name for r in heldout] == ["m03"]
    assert [r.name for r in train] == ["m00", "m01", "m05", "m07", "m09", "m11"]


def test_train_sim_delta_command_on_sage_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from so101_common import sage
    from so101_common.trajectory import JointTrajectory

    root = tmp_path / "output" / "real" / "so101" / "custom"
    for index, name in enumerate(("a_motion", "b_motion", "c_motion")):  # sorted index 2 (c_motion) is held out
        recording = lagged_arm_recording(name, 12.0, index)
        command = JointTrajectory(recording.time, recording.command)
        state = JointTrajectory(recording.time, recording.position, np.zeros_like(recording.position),
                                np.zeros_like(recording.position))
        sage.write_run(sage.run_from_trajectories(command, state, "real"), root / name)
    out = tmp_path / "models" / "sd.onnx"
    assert run_cli("so101_sim2real.sim_delta.cli", ["--sage-real", str(root), "--out", str(out), "--arch", "linear"]) == 0
    printed = capsys.readouterr().out
    assert "held out: c_motion" in printed and "wrist_roll" in printed
    meta = load_model(out, role="sim_delta").metadata
    assert meta.provenance["motions"] == ["a_motion", "b_motion"] and meta.provenance["heldout_motions"] == ["c_motion"]
    report = json.loads(out.with_suffix(".json").read_text())
    cuts = {row["joint"]: row["cut_percent"] for row in report["linear"]["heldout"]}
    assert min(cuts.values()) > 50.0, cuts  # the known lag and offset, learned from two motions, on the third
    assert run_cli("so101_sim2real.sim_delta.cli", ["--sage-real", str(tmp_path / "nowhere"), "--out", str(out)]) == 1
    assert capsys.readouterr().out.startswith("error: ")


def test_dagger_labels_steer_back_to_the_real_run(motions) -> None:
    from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig
    from so101_sim2real.sim_delta.trainer import motion_targets, rollout_samples

    recording = motions[1]
    config = SimDeltaConfig(history=3, future_steps=2, state_inputs=True, dagger_gain=0.5)
    targets = motion_targets(recording, MujocoSim(MujocoSimConfig(control_rate_hz=50.0)))
    norm = Normalisation(history_mean=(0.0,) * 18, history_std=(1.0,) * 18, command_mean=(0.0,) * 6,
                         command_std=(1.0,) * 6, delta_mean=(0.0,) * 6, delta_std=(1.0,) * 6)
    arch = ArchConfig(kind="linear", joints=6, history=3, features=3, future_steps=2)
    meta = metadata_for(FitResult(None, norm), arch, config, (0.1,) * 6, {})  # type: ignore[arg-type]
    samples = rollout_samples(recording, lambda history, commands: np.zeros(6), meta, targets, config, lambda: None)
    nominal = replay(recording).position  # Δ = 0: the states visited are the nominal replay's
    expected = targets[2] + 0.5 * (recording.position - nominal)
    np.testing.assert_allclose(samples.delta, expected[::config.sample_stride], atol=1e-9)
    np.testing.assert_allclose(samples.history[:, -1, :6], nominal[::config.sample_stride], atol=1e-9)


def test_state_fed_training_with_dagger_runs_and_recovers_the_gap(motions, tmp_path: Path) -> None:
    train, unseen = motions
    config = SimDeltaConfig(arch="linear", history=6, future_steps=2, sample_stride=1, state_inputs=True,
                            dagger_iterations=1)
    result = train_sim_delta(train, config)
    assert any(line.startswith("DAgger 1:") for line in result.log)
    assert "1 DAgger rounds" in result.metadata.provenance["objective"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_model(save_onnx(result.module, result.metadata, tmp_path / "sd.onnx"), role="sim_delta")
    evaluation = evaluate([unseen], model.delta, model.metadata, reset_state=model.reset_state)
    assert np.all(evaluation.cut_percent > 50.0), evaluation.rows()


def test_play_offsets_keep_the_side_of_the_last_move() -> None:
    # one joint, radius 0.02: start 0.05 above the first command, rise to 0.1, back 0.03 (inside the band), down to 0
    command = np.concatenate([np.zeros(3), np.linspace(0.0, 0.1, 11), np.full(5, 0.1), np.full(5, 0.07), np.full(5, 0.0)])[:, None]
    offsets = play_offsets(command, np.array([0.05]), np.array([0.02]))[:, 0, 0]
    np.testing.assert_allclose(offsets[:3], 0.02)  # starts on the side the arm is on (clipped to the band)
    np.testing.assert_allclose(offsets[10:19], -0.02)  # trails a rising command by r, and keeps it through the hold
    np.testing.assert_allclose(offsets[19:24], 0.01)  # a step back inside the band: the output stays at 0.08
    np.testing.assert_allclose(offsets[24:], 0.02)  # a step down past the band: trails from above


@pytest.mark.parametrize("structure", ["joint", "per_joint_residual"])
def test_exported_recurrent_model_steps_the_training_recursion(motions, structure: str, tmp_path: Path) -> None:
    """The file's graph, stepped tick by tick through the replay's filter, gives the Δ the trained network
    gives on the offline (whole-recording) play offsets: one recursion, in training and in the replay."""
    import torch

    from so101_sim2real.sim_delta.trainer import teacher_samples

    train, unseen = motions
    config = SimDeltaConfig(arch="mlp", history=4, future_steps=2, hidden=16, epochs=1, sample_stride=1,
                            play_radii=(0.005, 0.02), structure=structure)
    result = train_sim_delta(train, config)
    assert result.metadata.state_size == 2 * 6 + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files = [save_onnx(result.module, result.metadata, tmp_path / "sd.onnx"),
                 save_torchscript(result.module, result.metadata, tmp_path / "sd.pt")]
    samples = teacher_samples(unseen, (unseen.position, np.zeros_like(unseen.position), np.zeros_like(unseen.position)), config)
    norm = result.fit.normalisation
    with torch.no_grad():
        history, commands, _ = normalised_tensors(norm, samples.history, samples.teacher_commands(), samples.delta)
        offline = result.fit.module(history, commands).numpy() * np.array(norm.delta_std) + np.array(norm.delta_mean)
    offline = np.clip(offline, -np.array(result.metadata.delta_bounds), np.array(result.metadata.delta_bounds))
    for path in files:
        model = load_model(path, role="sim_delta")
        for _ in range(2):  # a second stream starts from a reset state: the same Δ
            recorder = SimDeltaFilter(model.delta, model.metadata, unseen.time, unseen.command, model.reset_state)
            replay(unseen, recorder)
            np.testing.assert_allclose(np.array(recorder.deltas), offline[:len(recorder.deltas)], atol=2e-5)
        last = play_offsets(unseen.command, unseen.position[0], np.array(config.play_radii))[len(recorder.deltas) - 1]
        np.testing.assert_allclose(model.state[:-1], last.reshape(-1), atol=1e-6)
        assert model.state[-1] == 1.0
    with pytest.raises(ValueError, match="needs its reset_state"):
        SimDeltaFilter(model.delta, model.metadata, unseen.time, unseen.command)


def test_recurrent_metadata_needs_a_recurrent_graph(motions, tmp_path: Path) -> None:
    config = SimDeltaConfig(arch="linear", history=4, future_steps=2, play_radii=())
    result = train_sim_delta(motions[0][:1], config)
    stateless = result.metadata.model_copy(update={"state_size": 13})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = save_onnx(result.module, result.metadata, tmp_path / "plain.onnx")
    import onnx

    from so101_gaponet.metadata import METADATA_KEY, ModelFileError

    proto = onnx.load(str(path))
    next(p for p in proto.metadata_props if p.key == METADATA_KEY).value = stateless.to_json()
    onnx.save(proto, str(path))
    with pytest.raises(ModelFileError, match=r"expected 3 inputs \(history, commands, state\)"):
        load_model(path, role="sim_delta")


def test_gravity_torque_input_is_mujocos_gravity_torque() -> None:
    """The graph's gravity input at a pose equals MuJoCo's bias force at rest there (to the wrist roll's and
    the gripper's small share), on the gravity joints, and is 0 on the others."""
    import mujoco
    import torch

    from so101_common.joints import JOINT_NAMES
    from so101_sim2real.replay.mujoco_backend import MujocoSim
    from so101_sim2real.sim_delta.network import GRAVITY_JOINTS, GravityTorque
    from so101_sim2real.sim_delta.targets import gravity_coefficients

    sim = MujocoSim()
    gravity = GravityTorque(gravity_coefficients(sim))
    model, data = sim.model, mujoco.MjData(sim.model)
    dof = [model.jnt_dofadr[model.joint(name).id] for name in JOINT_NAMES]
    poses = np.random.default_rng(3).uniform(-1.5, 1.5, (100, len(JOINT_NAMES)))
    expected = np.empty_like(poses)
    for i, pose in enumerate(poses):
        data.qpos[[model.jnt_qposadr[model.joint(name).id] for name in JOINT_NAMES]] = pose
        mujoco.mj_forward(model, data)
        expected[i] = data.qfrc_bias[dof]
    with torch.no_grad():
        torque = gravity(torch.tensor(poses, dtype=torch.float32)[:, None, :])[:, 0].numpy()
    loaded = [JOINT_NAMES.index(name) for name in GRAVITY_JOINTS]
    assert expected[:, loaded].std(axis=0).min() > 0.05  # the poses load every gravity joint
    np.testing.assert_allclose(torque[:, loaded], expected[:, loaded], atol=0.01)
    np.testing.assert_array_equal(np.delete(torque, loaded, axis=1), 0.0)


def test_only_the_sim_delta_architectures_train() -> None:
    from so101_sim2real.sim_delta import SIM_DELTA_KINDS

    assert set(SIM_DELTA_KINDS) == set(DEFAULT_EPOCHS)  # every architecture --compare trains has its budget
    with pytest.raises(ValueError, match="arch must be one of"):
        SimDeltaConfig(arch="joint_mlp")  # the compensator's kind: --compare used to crash on it


def test_folded_graph_is_the_play_state_model_in_fewer_nodes(motions, tmp_path: Path) -> None:
    """The shipped structure's file holds the folded graph: the same Δ and state, step after step from the
    stream's start, as the play-state model it folds, in under half the graph nodes."""
    import onnx
    import torch

    from so101_sim2real.sim_delta.folded import FoldedPlayStateModel, fold
    from so101_sim2real.sim_delta.network import PlayStateModel

    config = SimDeltaConfig(arch="mlp", history=6, future_steps=3, hidden=16, epochs=1, sample_stride=2)
    result = train_sim_delta(motions[0][:1], config)
    play = PlayStateModel(result.fit.module)  # type: ignore[arg-type]
    folded = result.module
    assert isinstance(folded, FoldedPlayStateModel)
    meta = result.metadata
    generator = torch.Generator().manual_seed(5)
    state = torch.zeros(1, meta.state_size)
    folded_state = state.clone()
    with torch.no_grad():
        for _ in range(20):
            history = torch.randn(1, meta.history, meta.history_columns, generator=generator)
            commands = torch.randn(1, meta.future_steps, len(JOINTS), generator=generator)
            delta, state = play(history, commands, state)
            folded_delta, folded_state = folded(history, commands, folded_state)
            np.testing.assert_allclose(folded_delta.numpy(), delta.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(folded_state.numpy(), state.numpy(), atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nodes = [len(onnx.load(str(save_onnx(module, meta, tmp_path / f"{name}.onnx"))).graph.node)
                 for name, module in (("play", play), ("folded", fold(play)))]
    assert nodes[1] < nodes[0] / 2
