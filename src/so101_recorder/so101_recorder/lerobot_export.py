"""Export episode bags as a LeRobotDataset v3.0, through LeRobot's own dataset API (0.4.4).

Per bag, one LeRobot episode sampled at ``fps`` on the span where both streams have data:

- ``observation.state`` = measured joint positions (``/joint_states``);
- ``action`` = the command stream: the first present of ``action_topics`` (``/joint_command`` for
  policy/scripted runs, ``/leader/joint_states`` for teleoperation);
- optionally camera images (``sensor_msgs/Image`` rgb8/bgr8/mono8 or ``CompressedImage``) as LeRobot
  ``image`` features (PNG frames in the parquet files). Video features are not written: LeRobot's
  video path needs torchcodec to decode, which this environment does not have.

Resampling is a zero-order hold (the latest sample at or before each frame time), which is what a
LeRobot control loop sees when it reads the robot at ``fps``. Units are LeRobot's SO-101 units
(``use_degrees=True``): degrees from mid-range for arm joints, 0..100 for the gripper; feature names
``<joint>.pos`` in :data:`so101_common.joints.JOINT_NAMES` order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from so101_common import topics
from so101_common.joints import JOINTS, gripper_rad_to_percent
from so101_common.trajectory import JointTrajectory
from so101_recorder.bag_reader import Bag, load_joint_states
from so101_recorder.errors import RecorderError

__all__ = ["ExportConfig", "ExportReport", "export_lerobot", "lerobot_features", "to_lerobot_units", "hold_indices"]

LOG = logging.getLogger(__name__)
MOTOR_NAMES = tuple(f"{j.name}.pos" for j in JOINTS)


@dataclass
class ExportConfig:
    repo_id: str = "local/so101_teleop"  # LeRobot repo id (local only; nothing is pushed)
    root: Path = Path("datasets/so101_teleop")  # dataset directory; must not exist yet
    fps: int = 30  # frame rate of the exported episodes
    task: str | None = None  # task text for every frame (None: each episode's own task name)
    state_topic: str = topics.absolute(topics.JOINT_STATES)
    action_topics: tuple[str, ...] = (topics.absolute(topics.JOINT_COMMAND), topics.absolute(topics.LEADER_STATES))  # first one present is used
    cameras: dict[str, str] = field(default_factory=dict)  # camera name -> image topic
    robot_type: str = "so_follower"  # LeRobot's robot name for the SO-100/101 follower
    time_source: str = "header"  # "header" stamps or "receive" (bag) times

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        if self.fps <= 0:
            raise RecorderError(f"fps must be positive, got {self.fps}")


@dataclass
class ExportReport:
    root: Path
    episodes: int = 0
    frames: int = 0
    per_bag: list[str] = field(default_factory=list)  # one line per exported bag


def to_lerobot_units(position: np.ndarray) -> np.ndarray:
    """Positions in rad, :data:`JOINT_NAMES` order → LeRobot SO-101 units (deg; gripper 0..100)."""
    position = np.asarray(position, dtype=np.float64)
    out = np.degrees(position)
    for j, spec in enumerate(JOINTS):
        if spec.is_gripper:
            out[..., j] = gripper_rad_to_percent(position[..., j])
    return out


def lerobot_features(camera_shapes: dict[str, tuple[int, int, int]] | None = None) -> dict[str, dict]:
    """The dataset features, built with LeRobot's own helper from the SO-101 motor names."""
    from lerobot.datasets.utils import hw_to_dataset_features

    hardware: dict[str, type | tuple] = {name: float for name in MOTOR_NAMES}
    features = hw_to_dataset_features(hardware, "action")
    hardware.update(camera_shapes or {})
    features.update(hw_to_dataset_features(hardware, "observation", use_video=False))
    return features


def hold_indices(sample_times: np.ndarray, frame_times: np.ndarray) -> np.ndarray:
    """Index of the latest sample at or before each frame time (zero-order hold; -1 before the first)."""
    return np.searchsorted(sample_times, frame_times, side="right") - 1


def export_lerobot(bags: Sequence[Path | str], config: ExportConfig) -> ExportReport:
    """Write ``bags`` as one LeRobotDataset v3.0 under ``config.root`` (see the module doc)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    if not bags:
        raise RecorderError("no bags to export")
    if config.root.exists():
        raise RecorderError(f"cannot export to {config.root}: it exists already (LeRobot creates the dataset root)")
    episodes = [_load_episode(Bag(path), config) for path in bags]
    shapes = {name: image.shape[1:] for name, image in episodes[0].images.items()}
    dataset = LeRobotDataset.create(repo_id=config.repo_id, fps=config.fps, features=lerobot_features(shapes),
                                    root=config.root, robot_type=config.robot_type, use_videos=False)
    report = ExportReport(config.root)
    try:
        for episode in episodes:
            for i in range(len(episode.state)):
                frame = {"observation.state": episode.state[i], "action": episode.action[i], "task": episode.task}
                frame.update({f"observation.images.{name}": images[i] for name, images in episode.images.items()})
                dataset.add_frame(frame)
            dataset.save_episode()
            report.episodes += 1
            report.frames += len(episode.state)
            report.per_bag.append(f"{episode.bag}: {len(episode.state)} frames, action from {episode.action_topic}, "
                                  f"task {episode.task!r}")
    finally:
        dataset.finalize()
    return report


@dataclass
class _Episode:
    bag: Path
    task: str
    action_topic: str
    state: np.ndarray  # (F, 6) float32, LeRobot units
    action: np.ndarray
    images: dict[str, np.ndarray]  # name -> (F, H, W, C) uint8


def _load_episode(bag: Bag, config: ExportConfig) -> _Episode:
    if bag.truncation:  # what it holds up to the cut is exported; the rest was never written
        LOG.warning("exporting only up to the cut: %s", bag.truncation)
    topics = bag.topics
    action_topic = next((t for t in config.action_topics if t in topics), None)
    if config.state_topic not in topics or action_topic is None:
        raise RecorderError(f"{bag.path}: needs {config.state_topic} and one of {list(config.action_topics)}; "
                            f"it has {sorted(topics)}")
    state = _complete(bag, config.state_topic, config.time_source)
    action = _complete(bag, action_topic, config.time_source)
    start, stop = max(state.time[0], action.time[0]), min(state.time[-1], action.time[-1])
    if stop <= start:
        raise RecorderError(f"{bag.path}: {config.state_topic} and {action_topic} do not overlap in time")
    frames = start + np.arange(int(np.floor((stop - start) * config.fps)) + 1) / config.fps
    images = {name: _images(bag, topic, frames, config.time_source) for name, topic in config.cameras.items()}
    task = config.task or (bag.episode.task if bag.episode else bag.path.name)
    return _Episode(bag.path, task, action_topic,
                    to_lerobot_units(state.position[hold_indices(state.time, frames)]).astype(np.float32),
                    to_lerobot_units(action.position[hold_indices(action.time, frames)]).astype(np.float32), images)


def _complete(bag: Bag, topic: str, time_source: str) -> JointTrajectory:
    read = load_joint_states(bag, topic, time_source=time_source)
    trajectory = read.trajectory
    if len(trajectory) == 0:
        raise RecorderError(f"{bag.path}: {topic} has no usable JointState messages")
    if read.missing_joints:
        raise RecorderError(f"{bag.path}: {topic} never carries {list(read.missing_joints)}")
    keep = ~np.isnan(trajectory.position).any(axis=1)
    if not keep.all():
        LOG.warning("%s: %s: %d samples lack some joint positions; left out", bag.path, topic, int((~keep).sum()))
    return JointTrajectory(trajectory.time[keep], trajectory.position[keep], names=trajectory.names)


def _images(bag: Bag, topic: str, frames: np.ndarray, time_source: str) -> np.ndarray:
    messages = bag.deserialize(topic)
    if not messages:
        raise RecorderError(f"{bag.path}: camera topic {topic} has no messages")
    if time_source == "header":
        times = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _t, m in messages])
    else:
        times = np.array([t * 1e-9 for t, _m in messages])
    order = np.argsort(times, kind="stable")
    index = np.clip(hold_indices(times[order], frames), 0, None)  # before the first image: hold the first
    decoded: dict[int, np.ndarray] = {}
    out = []
    for i in order[index].tolist():
        if i not in decoded:
            decoded[i] = _image_array(messages[i][1], topic)
        out.append(decoded[i])
    return np.stack(out)


def _image_array(msg, topic: str) -> np.ndarray:
    if hasattr(msg, "encoding"):  # sensor_msgs/Image
        channels = {"rgb8": 3, "bgr8": 3, "mono8": 1}.get(msg.encoding)
        if channels is None:
            raise RecorderError(f"{topic}: image encoding {msg.encoding!r} is not supported (rgb8, bgr8, mono8)")
        rows = np.asarray(msg.data, dtype=np.uint8).reshape(msg.height, msg.step)
        image: np.ndarray = rows[:, :msg.width * channels].reshape(msg.height, msg.width, channels)
        image = image[..., ::-1] if msg.encoding == "bgr8" else image
        return np.repeat(image, 3, axis=2) if channels == 1 else np.ascontiguousarray(image)
    import cv2  # sensor_msgs/CompressedImage

    decoded = cv2.imdecode(np.asarray(msg.data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if decoded is None:
        raise RecorderError(f"{topic}: cannot decode a {msg.format!r} compressed image")
    return np.ascontiguousarray(decoded[..., ::-1])
