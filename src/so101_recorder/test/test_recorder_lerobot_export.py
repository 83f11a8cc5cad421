"""Bags → LeRobotDataset v3.0 through LeRobot's own API, loaded back offline from the local root."""

from __future__ import annotations

import math

import numpy as np
import pytest
from recorder_helpers import JOINT_STATE, TYPESTORE, joint_state, write_bag

from so101_common.joints import GRIPPER, JOINT_NAMES
from so101_recorder.errors import RecorderError
from so101_recorder.lerobot_export import ExportConfig, export_lerobot, hold_indices, to_lerobot_units

T0 = 1_700_000_000
IMAGE = "sensor_msgs/msg/Image"


def _arm_value(k: int, j: int) -> float:
    return 0.2 * math.sin(0.05 * k + j)  # rad, inside every joint's range


def _bag(root, task: str, samples: int, action_topic: str, with_images: bool = False):
    messages = []
    for k in range(samples):  # state at 100 Hz, commands at 50 Hz slightly later, images at 10 Hz
        t = T0 * 10**9 + k * 10_000_000
        gripper = GRIPPER.lower + GRIPPER.span * (k % 100) / 100
        state = [_arm_value(k, j) for j in range(5)] + [gripper]
        messages.append(("/joint_states", JOINT_STATE, joint_state(t // 10**9, t % 10**9, position=state), t))
        if k % 2 == 0:
            command = [v + 0.01 for v in state]
            stamp = t + 1_000_000
            messages.append((action_topic, JOINT_STATE, joint_state(stamp // 10**9, stamp % 10**9, position=command), stamp))
        if with_images and k % 10 == 0:
            messages.append(("/camera/image_raw", IMAGE, _image(t, k), t))
    return write_bag(root, task, messages)


def _image(t: int, k: int) -> bytes:
    types = TYPESTORE.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=t // 10**9, nanosec=t % 10**9),
                                          frame_id="camera")
    pixels = np.full((4, 6, 3), k % 256, dtype=np.uint8)
    pixels[..., 2] = 7  # bgr8: blue channel constant
    msg = types[IMAGE](header=header, height=4, width=6, encoding="bgr8", is_bigendian=0, step=18, data=pixels.ravel())
    return bytes(TYPESTORE.serialize_cdr(msg, IMAGE))


def test_units_and_hold():
    rad = np.array([[math.pi / 2, -math.pi / 4, 0.0, 0.1, -0.2, GRIPPER.lower + GRIPPER.span / 4]])
    np.testing.assert_allclose(to_lerobot_units(rad), [[90.0, -45.0, 0.0, math.degrees(0.1), math.degrees(-0.2), 25.0]])
    assert hold_indices(np.array([0.0, 1.0, 2.0]), np.array([-1.0, 0.0, 0.5, 1.0, 5.0])).tolist() == [-1, 0, 0, 1, 2]


def test_export_two_bags_and_load_them_back(tmp_path):
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    bags = [_bag(tmp_path / "bags", "pick cube", 200, "/joint_command", with_images=True),
            _bag(tmp_path / "bags", "teleop wave", 150, "/leader/joint_states", with_images=True)]
    root = tmp_path / "dataset"
    report = export_lerobot(bags, ExportConfig(repo_id="local/so101_test", root=root, fps=30,
                                               cameras={"front": "/camera/image_raw"}))
    assert report.episodes == 2 and "/leader/joint_states" in report.per_bag[1]

    dataset = LeRobotDataset("local/so101_test", root=root)
    assert dataset.num_episodes == 2 and dataset.fps == 30
    names = [f"{j}.pos" for j in JOINT_NAMES]
    assert dataset.meta.features["observation.state"]["names"] == names
    assert dataset.meta.features["action"]["names"] == names
    assert dataset.meta.features["observation.images.front"]["dtype"] == "image"
    # span where state and action overlap: [T0 + 1 ms, T0 + 1.981 s] and [.., T0 + 1.481 s] → 60 and 45 frames at 30 fps
    assert [int(e["length"]) for e in dataset.meta.episodes] == [60, 45] and dataset.num_frames == report.frames == 105

    frame = dataset[10]  # episode 0, t = T0 + 0.001 + 10/30 s: latest state sample k = 33, latest command k = 32
    assert frame["task"] == "pick cube" and int(frame["episode_index"]) == 0
    state, action = frame["observation.state"].numpy(), frame["action"].numpy()
    np.testing.assert_allclose(state[:5], [math.degrees(_arm_value(33, j)) for j in range(5)], rtol=1e-5)
    np.testing.assert_allclose(state[5], 33.0, atol=1e-3)  # gripper 0..100
    np.testing.assert_allclose(action[:5], [math.degrees(_arm_value(32, j) + 0.01) for j in range(5)], rtol=1e-5)
    image = frame["observation.images.front"]  # latest image k = 30 (10 Hz); LeRobot gives CHW float in [0, 1]
    assert tuple(image.shape) == (3, 4, 6)
    np.testing.assert_allclose(image[0].numpy(), 7 / 255, atol=1e-6)  # red (from bgr8's third channel)
    np.testing.assert_allclose(image[2].numpy(), 30 / 255, atol=1e-6)
    last = dataset[104]
    assert last["task"] == "teleop wave" and int(last["episode_index"]) == 1
    np.testing.assert_allclose(float(last["timestamp"]), 44 / 30, atol=1e-4)


def test_export_refuses_bags_without_the_streams_and_existing_roots(tmp_path):
    bag = write_bag(tmp_path / "bags", "x", [("/joint_states", JOINT_STATE, joint_state(1, 0, position=[0.0] * 6), 1)])
    with pytest.raises(RecorderError, match="needs /joint_states and one of"):
        export_lerobot([bag], ExportConfig(root=tmp_path / "out"))
    (tmp_path / "exists").mkdir()
    with pytest.raises(RecorderError, match="exists already"):
        export_lerobot([bag], ExportConfig(root=tmp_path / "exists"))


def test_a_truncated_bag_is_exported_up_to_its_cut_with_a_warning(tmp_path, caplog):
    """A recorder killed mid-episode leaves a bag cut short: it exported silently (48 of 181 frames), where
    pairing and replay say where the cut is and how to rebuild the bag."""
    bag = _bag(tmp_path / "bags", "pick cube", 3000, "/joint_command")
    whole = export_lerobot([bag], ExportConfig(repo_id="local/so101_whole", root=tmp_path / "whole", fps=30))
    assert "truncated" not in caplog.text
    mcap = next(bag.glob("*.mcap"))
    (bag / "metadata.yaml").unlink()
    mcap.write_bytes(mcap.read_bytes()[: mcap.stat().st_size // 2])
    report = export_lerobot([bag], ExportConfig(repo_id="local/so101_cut", root=tmp_path / "dataset", fps=30))
    assert 0 < report.frames < whole.frames
    assert f"exporting only up to the cut: {bag} is truncated at" in caplog.text
    assert f"so101 record --recover {bag}` rebuilds it" in caplog.text
