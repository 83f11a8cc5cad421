"""STL meshes as arrays, and a coarser copy of one for viewers that draw several arms live (numpy only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["TriangleMesh", "read_stl"]


@dataclass(frozen=True)
class TriangleMesh:
    vertices: np.ndarray  # (V, 3) float32, m
    triangles: np.ndarray  # (T, 3) uint32 vertex indices, counter-clockwise seen from outside

    def normals(self) -> np.ndarray:
        """(V, 3) unit vertex normals: the area-weighted mean of the faces around each vertex."""
        v = self.vertices.astype(np.float64)
        faces = np.cross(v[self.triangles[:, 1]] - v[self.triangles[:, 0]], v[self.triangles[:, 2]] - v[self.triangles[:, 0]])
        normals = np.zeros_like(v)
        for corner in range(3):
            np.add.at(normals, self.triangles[:, corner], faces)
        length = np.linalg.norm(normals, axis=1, keepdims=True)
        return (normals / np.where(length > 0, length, 1.0)).astype(np.float32)

    def simplified(self, cell: float) -> TriangleMesh:
        """Vertex clustering: vertices within one ``cell`` (m) grid cell merge into their mean, and triangles that
        collapse are dropped. Keeps the silhouette to about a cell; ``cell`` 2 mm leaves the SO-101's parts a
        tenth of their triangles."""
        keys = np.floor(self.vertices / cell).astype(np.int64)
        _, cluster, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        cluster = cluster.reshape(-1)
        sums = np.zeros((len(counts), 3))
        np.add.at(sums, cluster, self.vertices)
        triangles = cluster[self.triangles]
        keep = (triangles[:, 0] != triangles[:, 1]) & (triangles[:, 1] != triangles[:, 2]) & \
            (triangles[:, 0] != triangles[:, 2])
        return TriangleMesh((sums / counts[:, None]).astype(np.float32), triangles[keep].astype(np.uint32))


def read_stl(path: str | Path) -> TriangleMesh:
    """A binary STL file (the description's meshes), identical corners merged into shared vertices."""
    data = Path(path).read_bytes()
    count = int(np.frombuffer(data, dtype="<u4", count=1, offset=80)[0])
    if len(data) != 84 + 50 * count:
        raise ValueError(f"{path}: not a binary STL of {count} triangles ({len(data)} bytes)")
    record = np.dtype([("normal", "<f4", 3), ("corners", "<f4", (3, 3)), ("attribute", "<u2")])
    corners = np.frombuffer(data, dtype=record, count=count, offset=84)["corners"].reshape(-1, 3)
    vertices, index = np.unique(corners, axis=0, return_inverse=True)
    return TriangleMesh(vertices.astype(np.float32), index.reshape(-1, 3).astype(np.uint32))
