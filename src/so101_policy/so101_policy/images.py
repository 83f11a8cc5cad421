"""Camera plumbing of the policy node without ROS: image-topic parameters and image messages → arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from so101_policy.loaders import IMAGE_PREFIX

__all__ = ["parse_image_topics", "image_msg_to_array"]


def parse_image_topics(entries: Sequence[str] | None) -> dict[str, str]:
    """``["front=/cam/front/image_raw", ...]`` → ``{"observation.images.front": "/cam/front/image_raw"}``."""
    mapping: dict[str, str] = {}
    for entry in entries or ():
        entry = entry.strip()
        if not entry:
            continue
        key, sep, topic = entry.partition("=")
        key, topic = key.strip(), topic.strip()
        if not sep or not key or not topic:
            raise ValueError(f"image_topics entry {entry!r} is not 'observation.images.<cam>=<topic>'")
        if not key.startswith(IMAGE_PREFIX):
            key = IMAGE_PREFIX + key
        if key in mapping:
            raise ValueError(f"image_topics names {key!r} twice")
        mapping[key] = topic
    return mapping


_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8UC1": 1, "8UC3": 3}


def image_msg_to_array(msg: Any) -> np.ndarray:
    """A sensor_msgs/Image (anything with its fields; rgb8, bgr8, rgba8, bgra8, mono8) → HxWx3 (or HxWx1) uint8, RGB."""
    channels = _CHANNELS.get(msg.encoding)
    if channels is None:
        raise ValueError(f"image encoding {msg.encoding!r} not supported; use one of {sorted(_CHANNELS)}")
    row = msg.width * channels
    buf = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if msg.step < row or buf.size < msg.step * msg.height:
        raise ValueError(f"image data too short: {buf.size} bytes for {msg.height}x{msg.step}")
    img: np.ndarray = buf[: msg.step * msg.height].reshape(msg.height, msg.step)[:, :row].reshape(msg.height, msg.width, channels)
    if msg.encoding in ("bgr8", "bgra8"):
        img = img[:, :, 2::-1]
    elif channels == 4:
        img = img[:, :, :3]
    return np.ascontiguousarray(img)
