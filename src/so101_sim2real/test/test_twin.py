"""The live gap twin's core against the offline MuJoCo replay of the same commands, its rolling RMSE against
known answers, and its band against a virtual arm with a payload (simulated time, no DDS)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from twin_helpers import ArmRun, arm_run, feed, gap_series

from so101_common.joints import JOINT_NAMES
from so101_common.schema import SchemaError
from so101_common.trajectory import JointTrajectory
from so101_gaponet.chunks import ActionChunk
from so101_gaponet.model_file import load_model
from so101_sim2real.replay.core import ReplaySource
from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig, replay_trajectory
from so101_sim2real.replay.offline import replay_in_mujoco
from so101_sim2real.sim_delta.filter import LiveSimDeltaFilter
from so101_sim2real.twin import GapSample, GapTwin, RollingRmse, TwinConfig, TwinError
from so101_sim2real.twin_band import TwinBand, fit_band, load_band, write_band

SIM_DELTA = Path(__file__).resolve().parents[3] / "models" / "so101_sim_delta.onnx"  # the workspace's models/
J = len(JOINT_NAMES)


def _start_pose(run: ArmRun) -> np.ndarray:
    """The offline replay's initial state: the measured pose at the first command (``replay.core``'s rule)."""
    return np.array([np.interp(run.command_time[0], run.state_time, run.position[:, j]) for j in range(J)])


def _at(state: JointTrajectory, stamps: np.ndarray) -> np.ndarray:
    """The offline replay's position, velocity and effort (K, 3J) at ``stamps``, interpolated between physics steps."""
    columns = [state.position, state.velocity, state.effort]
    return np.column_stack([np.interp(stamps, state.time, c[:, j]) for c in columns for j in range(J)])


def _rows(samples: list[GapSample]) -> np.ndarray:
    return np.array([np.concatenate([s.sim_position, s.sim_velocity, s.sim_effort]) for s in samples])


def test_the_twin_is_the_offline_replay_of_the_same_commands() -> None:
    run = arm_run("default", seed=3, seconds=6.0)
    twin = GapTwin(MujocoSim())
    # the joint states reach the twin up to 30 ms late (in order), after commands stamped later than them
    rng = np.random.default_rng(0)
    arrivals, latest = [], -np.inf
    for when, kind, index in run.events():
        if kind == "state":
            latest = max(latest, when + rng.uniform(0.0, 0.03))
        arrivals.append((latest if kind == "state" else when, kind, index))
    arrivals.sort()
    samples: list[GapSample] = []
    for _, kind, index in arrivals:
        if kind == "state":
            samples += twin.on_measured(run.state_time[index], run.position[index], run.velocity[index])
        else:
            samples += twin.on_command(run.command_time[index], run.command[index])
    offline = replay_trajectory(JointTrajectory(run.command_time, run.command, names=JOINT_NAMES), _start_pose(run))
    stamps = np.array([s.stamp for s in samples])
    expected = run.state_time[(run.state_time >= run.command_time[0]) & (run.state_time < run.command_time[-1])]
    assert np.array_equal(stamps, expected)  # every measured state the sim reached, once, in order
    assert np.abs(_rows(samples) - _at(offline, stamps)).max() < 1e-9
    measured = {t: k for k, t in enumerate(run.state_time)}
    rows = [measured[t] for t in stamps]
    assert np.allclose([s.position_gap for s in samples], [s.sim_position for s in samples] - run.position[rows])
    assert np.allclose([s.velocity_gap for s in samples], [s.sim_velocity for s in samples] - run.velocity[rows])
    assert twin.replay.late == 0 and twin.unpaired == 0 and twin.starts == 1


def test_with_a_sim_delta_model_the_twin_is_the_offline_delta_replay() -> None:
    run = arm_run("default", seed=4, seconds=4.0)
    model = load_model(SIM_DELTA, joints=JOINT_NAMES)
    delta = LiveSimDeltaFilter(model.delta, model.metadata, JOINT_NAMES, model.reset_state)
    twin = GapTwin(MujocoSim(MujocoSimConfig(control_rate_hz=model.metadata.rate_hz)), delta=delta)
    samples: list[GapSample] = []
    for when, kind, index in run.events():
        if kind == "state":
            samples += twin.on_measured(when, run.position[index], run.velocity[index])
        else:  # the policy's action chunk: its next commands, published with each command
            delta.chunk = ActionChunk(run.command_time[index:index + 8], run.command[index:index + 8])
            samples += twin.on_command(when, run.command[index])
    source = ReplaySource("run", JointTrajectory(run.command_time, run.command, names=JOINT_NAMES), _start_pose(run))
    _, offline = replay_in_mujoco(source, delta_model=SIM_DELTA, progress=False)
    nominal = replay_trajectory(source.command, source.initial_position)
    stamps = np.array([s.stamp for s in samples])
    assert len(stamps) > 300
    assert np.abs(_rows(samples) - _at(offline, stamps)).max() < 1e-9
    assert np.abs(_rows(samples)[:, :J] - _at(nominal, stamps)[:, :J]).max() > 0.01  # Δ moved the sim


def test_rolling_rmse_known_answers() -> None:
    rmse = RollingRmse(window_s=1.0, joints=2)
    position, velocity = rmse.add(0.0, np.array([0.3, -0.1]), np.array([0.2, np.nan]))
    assert np.allclose(position, [0.3, 0.1]) and velocity[0] == pytest.approx(0.2) and np.isnan(velocity[1])
    position, velocity = rmse.add(0.5, np.array([0.4, 0.1]), np.array([0.0, 0.5]))
    assert np.allclose(position, [np.sqrt((0.09 + 0.16) / 2), 0.1])
    assert np.allclose(velocity, [np.sqrt(0.04 / 2), 0.5])  # the unmeasured velocity is left out, not a zero
    position, _ = rmse.add(1.0, np.array([0.0, 0.1]), np.array([0.0, 0.0]))  # the window is (0, 1]: t = 0 leaves
    assert np.allclose(position, [np.sqrt(0.16 / 2), 0.1])


def test_a_pause_holds_then_restarts_from_the_measured_pose_and_late_commands_count() -> None:
    twin = GapTwin(MujocoSim(), TwinConfig(window_s=0.5, restart_after_s=0.5, hold_after_s=0.2))
    pose_a, pose_b = np.full(J, 0.1), np.array([0.4, -0.3, 0.5, 0.2, -0.2, 0.3])
    for k in range(100):  # 1 s at pose A, commands at 50 Hz
        twin.on_measured(k * 0.01 + 0.002, pose_a)
        if k % 2 == 0:
            twin.on_command(k * 0.01, pose_a)
    twin.on_command(0.97, pose_a)  # stamped before the last control tick (0.98): late
    assert twin.replay.late == 1
    held = twin.on_measured(1.152, pose_a)  # the stream paused: only the states keep the sim going
    assert not held and twin.replay.next_time == pytest.approx(0.98)  # not within 0.2 s of the last command
    held = twin.on_measured(1.252, pose_a)  # 0.2 s on: the sim runs to 1.052 s, holding the command
    assert twin.replay.next_time == pytest.approx(1.055)
    assert [s.stamp for s in held] == pytest.approx([0.982, 0.992])  # the measured states the sim now reached
    moved = [s for k in range(126, 200) for s in twin.on_measured(k * 0.01 + 0.002, pose_b)]  # moved by hand to B
    assert moved and np.allclose(moved[-1].position_gap, pose_a - pose_b, atol=1e-3)  # the twin held A: the gap shows it
    samples = twin.on_command(2.0, pose_b)  # the stream resumes 1 s after its last command: a new start, at B
    samples += twin.on_measured(2.002, pose_b) + twin.on_command(2.02, pose_b)
    assert twin.starts == 2
    assert [s.stamp for s in samples] == pytest.approx([2.002])
    assert np.abs(samples[0].sim_position - pose_b).max() < 1e-3  # the sim starts where the arm is
    assert np.abs(samples[0].position_rmse).max() < 1e-3 and not samples[0].warm  # the window starts again


def test_band_names_the_joints_a_payload_loads() -> None:
    """A band recorded on the default arm; a held-out motion on the same arm stays in it, the same motion
    with a 300 g payload at the gripper takes the joints that carry its weight out of it (the profile's own
    words: more sag and load on shoulder_lift, elbow_flex and wrist_flex), and no other."""
    recorded = gap_series("default:0", feed(GapTwin(MujocoSim()), arm_run("default", seed=0, seconds=20.0)))
    band = fit_band([recorded], window_s=TwinConfig().window_s)

    def excursions(profile: str) -> set[tuple[str, str]]:
        samples = feed(GapTwin(MujocoSim()), arm_run(profile, seed=7, seconds=12.0))
        return {(e.joint, e.quantity) for s in samples if s.warm for e in band.check(s.position_rmse, s.velocity_rmse)}

    assert excursions("default") == set()
    assert excursions("heavy_payload") == {("shoulder_lift", "position"), ("elbow_flex", "position"),
                                           ("wrist_flex", "position")}


def test_band_file_round_trip_and_bad_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    time = np.arange(0.0, 6.0, 0.01)
    series = gap_series("synthetic", [GapSample(float(t), *(np.zeros(J),) * 3, 0.01 * rng.standard_normal(J),
                                                0.1 * rng.standard_normal(J), *(np.zeros(J),) * 2, True) for t in time])
    band = fit_band([series], window_s=1.0, k=3.0, position_margin=0.0, velocity_margin=0.0)
    assert band.joints["elbow_flex"].position.mean == pytest.approx(0.01, rel=0.2)  # RMSE of N(0, 0.01) noise
    position = band.joints["elbow_flex"].position
    assert position.high == pytest.approx(position.mean + 3 * position.std)
    assert load_band(write_band(tmp_path / "band.yaml", band)) == band
    (tmp_path / "extra.yaml").write_text((tmp_path / "band.yaml").read_text() + "margin: 0.01\n")
    with pytest.raises(SchemaError, match=r"extra.yaml: margin: unknown key"):
        load_band(tmp_path / "extra.yaml")
    (tmp_path / "joint.yaml").write_text((tmp_path / "band.yaml").read_text().replace("wrist_roll:", "wrist_twist:"))
    with pytest.raises(TwinError, match="wrist_twist"):
        load_band(tmp_path / "joint.yaml")
    with pytest.raises(TwinError, match="warm samples"):
        fit_band([gap_series("short", [])], window_s=1.0)
    assert isinstance(band, TwinBand)


def test_a_joint_that_does_not_answer_delays_the_start_and_never_the_pose_it_starts_from() -> None:
    """The driver publishes NaN for a servo that did not answer; the twin took it into its start pose and its
    MuJoCo reset raised, which ended the twin's process and the demo (seen on a loaded machine at start-up)."""
    twin = GapTwin(MujocoSim(), TwinConfig(window_s=0.5))
    pose = np.array([0.2, -0.3, 0.5, 0.1, -0.2, 0.4])
    silent = np.where(np.arange(J) == 0, pose, np.nan)  # only shoulder_pan answers
    for k in range(20):  # 0.2 s of states from one servo, commands at 50 Hz
        twin.on_measured(k * 0.01 + 0.002, silent)
        if k % 2 == 0:
            assert twin.on_command(k * 0.01, pose) == []
    assert twin.starts == 0 and not twin.started
    lift = JOINT_NAMES.index("shoulder_lift")
    half = silent.copy()
    half[lift:] = pose[lift:]
    half[lift] = np.nan  # all but shoulder_lift answer now
    twin.on_measured(0.202, half)
    twin.on_measured(0.212, pose)  # every servo answers
    twin.on_measured(0.222, np.where(np.arange(J) == lift, np.nan, pose))  # shoulder_lift drops out again
    twin.on_command(0.22, pose)
    assert twin.starts == 1
    samples = twin.on_measured(0.232, pose) + twin.on_command(0.24, pose) + twin.on_measured(0.242, pose)
    assert samples and np.all(np.isfinite(samples[-1].sim_position))
    assert np.abs(samples[-1].sim_position - pose).max() < 2e-3  # started where the arm was, lift from its one reading
