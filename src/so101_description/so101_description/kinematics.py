"""Forward kinematics and visual meshes straight from the URDF (numpy and the standard library only).

For viewers without ROS (the web view draws the arm from it): :class:`UrdfArm` reads the URDF's links,
their visuals (STL mesh file, origin, material colour) and joints (parent, child, origin, axis), and
:meth:`UrdfArm.link_poses` gives every link's pose in the root link's frame for a set of joint positions,
as robot_state_publisher would (``T_child = T_parent · T_origin · R(axis, q)``; fixed joints: ``q`` = 0).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_description.paths import MESH_URI_PREFIX, meshes_dir, urdf_path

__all__ = ["Visual", "UrdfJoint", "UrdfArm", "transform"]


def transform(xyz: tuple[float, float, float] = (0.0, 0.0, 0.0), rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
              ) -> np.ndarray:
    """The 4×4 homogeneous transform of a URDF ``<origin xyz rpy>`` (fixed-axis roll, pitch, yaw: R = Rz·Ry·Rx)."""
    roll, pitch, yaw = rpy
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    out = np.eye(4)
    out[:3, :3] = [[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                   [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                   [-sp, cp * sr, cp * cr]]
    out[:3, 3] = xyz
    return out


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """4×4 rotation by ``angle`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    c, s, t = math.cos(angle), math.sin(angle), 1.0 - math.cos(angle)
    out = np.eye(4)
    out[:3, :3] = [[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                   [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                   [t * x * z - s * y, t * y * z + s * x, t * z * z + c]]
    return out


@dataclass(frozen=True)
class Visual:
    mesh: Path  # STL file (m)
    origin: np.ndarray  # 4×4 pose of the mesh in its link's frame
    rgba: tuple[float, float, float, float]  # the material's colour


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    kind: str  # "revolute", "continuous", "prismatic" or "fixed"
    parent: str
    child: str
    origin: np.ndarray  # 4×4 pose of the joint frame in the parent link's frame
    axis: np.ndarray  # unit axis in the joint frame


def _numbers(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split())


def _origin(element: ET.Element | None) -> np.ndarray:
    if element is None:
        return np.eye(4)
    x, y, z = _numbers(element.get("xyz", "0 0 0"))
    roll, pitch, yaw = _numbers(element.get("rpy", "0 0 0"))
    return transform((x, y, z), (roll, pitch, yaw))


def _rgba(text: str) -> tuple[float, float, float, float]:
    r, g, b, a = _numbers(text)
    return r, g, b, a


def _link_of(joint: ET.Element, tag: str) -> str:
    element = joint.find(tag)
    if element is None or not element.get("link"):
        raise ValueError(f"URDF joint {joint.get('name')!r} has no {tag} link")
    return str(element.get("link"))


class UrdfArm:
    """The URDF's links, visuals and joints; :meth:`link_poses` for a set of joint positions."""

    def __init__(self, text: str, meshes: Path) -> None:
        root = ET.fromstring(text)
        colours = {m.get("name"): _rgba(colour.get("rgba", "1 1 1 1"))
                   for m in root.findall("material") if (colour := m.find("color")) is not None}
        self.visuals: dict[str, list[Visual]] = {}
        for link in root.findall("link"):
            visuals = []
            for visual in link.findall("visual"):
                mesh = visual.find("geometry/mesh")
                if mesh is None:
                    continue  # boxes and cylinders: the SO-101's visuals are all meshes
                filename = mesh.get("filename", "")
                path = meshes / filename.removeprefix(MESH_URI_PREFIX) if filename.startswith(MESH_URI_PREFIX) \
                    else Path(filename)
                material = visual.find("material")
                colour = material.find("color") if material is not None else None
                rgba = _rgba(colour.get("rgba", "")) if colour is not None else \
                    colours.get(material.get("name") if material is not None else None, (0.8, 0.8, 0.8, 1.0))
                visuals.append(Visual(path, _origin(visual.find("origin")), rgba))
            self.visuals[str(link.get("name"))] = visuals
        joints = []
        for joint in root.findall("joint"):
            axis_element = joint.find("axis")
            axis = np.array(_numbers(axis_element.get("xyz", "1 0 0") if axis_element is not None else "1 0 0"))
            joints.append(UrdfJoint(str(joint.get("name")), str(joint.get("type")), _link_of(joint, "parent"),
                                    _link_of(joint, "child"), _origin(joint.find("origin")), axis / np.linalg.norm(axis)))
        children = {j.child for j in joints}
        roots = [name for name in self.visuals if name not in children]
        if len(roots) != 1:
            raise ValueError(f"the URDF needs one root link, found {roots}")
        self.root = roots[0]
        self.joints: list[UrdfJoint] = []  # parents before children
        reached = {self.root}
        while len(self.joints) < len(joints):
            ready = [j for j in joints if j.parent in reached and j.child not in reached]
            if not ready:
                raise ValueError("the URDF's joints do not form a tree from its root link")
            self.joints += ready
            reached |= {j.child for j in ready}
        self.links = (self.root, *(j.child for j in self.joints))

    @classmethod
    def load(cls, path: Path | None = None) -> UrdfArm:
        """The shipped URDF (or ``path``), its ``package://`` meshes resolved to the shipped STL files."""
        return cls((path or urdf_path()).read_text(encoding="utf-8"), meshes_dir())

    @property
    def movable_joints(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints if j.kind != "fixed")

    def link_poses(self, positions: Mapping[str, float]) -> dict[str, np.ndarray]:
        """Every link's 4×4 pose in the root link's frame; joints missing from ``positions`` are at 0."""
        poses = {self.root: np.eye(4)}
        for joint in self.joints:
            pose = poses[joint.parent] @ joint.origin
            q = float(positions.get(joint.name, 0.0))
            if joint.kind in ("revolute", "continuous"):
                pose = pose @ _rotation(joint.axis, q)
            elif joint.kind == "prismatic":
                pose = pose.copy()
                pose[:3, 3] += pose[:3, :3] @ (joint.axis * q)
            poses[joint.child] = pose
        return poses
