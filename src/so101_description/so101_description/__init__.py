"""SO-101 URDF, MJCF, meshes and RViz configuration (the joint spec they follow is :mod:`so101_common.joints`)."""
