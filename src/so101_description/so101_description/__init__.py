"""SO-101 joint specification, URDF, MJCF, meshes and RViz configuration."""
