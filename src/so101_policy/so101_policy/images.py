"""Camera plumbing without ROS: image-topic parameters, image messages → arrays → the policy's (C, H, W) inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from so101_policy.spec import IMAGE_PREFIX, MissingImageError, PolicyObservation, PolicySpec

__all__ = ["parse_image_topics", "image_msg_to_array", "image_to_chw", "images_for"]


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


def image_to_chw(image: np.ndarray, shape: Sequence[int], key: str = "image") -> np.ndarray:
    """An HxW[xC] uint8 (or float in [0, 1]) image → float32 ``(C, H, W)`` in [0, 1] at ``shape``.

    Resized with OpenCV (area) when the camera's size differs from the trained one, like LeRobot's
    async inference server; grey ↔ RGB converted to the expected channel count.
    """
    img: np.ndarray = np.asarray(image)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3, 4):
        raise MissingImageError(f"{key}: expected an HxW, HxWx1, HxWx3 or HxWx4 image, got shape {img.shape}")
    if img.shape[2] == 4:
        img = img[:, :, :3]
    channels, height, width = (int(s) for s in shape)
    if channels == 3 and img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    elif channels == 1 and img.shape[2] == 3:
        img = img.mean(axis=2, keepdims=True).astype(img.dtype)
    if img.shape[0] != height or img.shape[1] != width:
        import cv2

        img = cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)
        if img.ndim == 2:
            img = img[:, :, None]
    out = img.astype(np.float32)
    if np.issubdtype(np.asarray(image).dtype, np.integer):
        out /= 255.0
    return np.ascontiguousarray(out.transpose(2, 0, 1))


def images_for(spec: PolicySpec, obs: PolicyObservation) -> dict[str, np.ndarray]:
    """The policy's images as float32 (C, H, W) in [0, 1], or MissingImageError."""
    missing = [k for k in spec.image_features if k not in obs.images]
    if missing:
        raise MissingImageError(f"policy {spec.source} needs image(s) {missing}; none received yet")
    return {k: image_to_chw(obs.images[k], shape, k) for k, shape in spec.image_features.items()}
