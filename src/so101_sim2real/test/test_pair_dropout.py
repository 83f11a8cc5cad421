"""A recording that starts in a bus dropout: the driver's first joint states read NaN for the servos that did not
answer. Paired with the built-in MuJoCo replay, the replay starts from each joint's first measurement (as a sim started
from the arm would) instead of failing on the NaN start."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.metadata import EpisodeMetadata
from so101_sim2real.pairing.align import AlignConfig
from so101_sim2real.pairing.pair import load_runs, mujoco_replayer, pair_runs
from so101_sim2real.replay.core import joint_state_cdr

JOINT_STATE = "sensor_msgs/msg/JointState"
T0 = 1_700_000_000.0
DROPOUT_S = 0.05  # the first 5 joint states: every servo but the pan unread
START = np.array([0.1, -0.4, 0.6, 0.3, -0.2, 0.5])  # where the arm is (rad)


def _bag(root: Path) -> Path:
    """2 s holding ``START`` at 100 Hz, the first ``DROPOUT_S`` of joint states with NaN but for the pan."""
    path = next_episode_path(root, "hold")
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="hold")) as writer:
        for k in range(200):
            t = k * 0.01
            measured = START.copy()
            if t < DROPOUT_S:
                measured[1:] = np.nan
            stamp = round((T0 + t) * 1e9)
            writer.write("/joint_states", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, measured, np.zeros(6),
                                                                       np.zeros(6)), stamp)
            writer.write("/joint_command", JOINT_STATE, joint_state_cdr(T0 + t, JOINT_NAMES, START, np.zeros(6),
                                                                        np.zeros(6)), stamp)
    return path


def test_a_recording_that_starts_in_a_dropout_is_replayed_from_each_joint_s_first_reading(tmp_path: Path) -> None:
    (run,) = load_runs(_bag(tmp_path / "real"), "real", "/joint_states", "/joint_command")
    assert np.isnan(run.state.position[0, 1:]).all()  # the recording as the driver published it
    replayed, _ = mujoco_replayer()(run)
    assert np.abs(replayed.state.position[0] - START).max() < 1e-3  # started where the arm was
    dataset = pair_runs([run], mujoco_replayer(), AlignConfig(), progress=False)
    (episode,) = dataset.episodes
    assert np.isfinite(episode.sim_position).all()
