"""Writes data/reference_fk.json: the tool frame at fixed poses, computed from the official description.

The fixture pins our URDF/MJCF to the official SO-ARM100 ``so101_new_calib`` figures without the tests
reading files outside the repository. Re-run only when the reference changes:

    python src/so101_description/test/make_reference_fk.py PATH/TO/SO-ARM100/Simulation/SO101

Positions come from ``so101_new_calib.xml`` (site ``gripperframe``); orientations from
``so101_new_calib.urdf`` (link ``gripper_frame_link``: the official MJCF site is rotated 90° about y
from the URDF frame; we follow the URDF: z points out between the jaws).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mujoco
import numpy as np

from so101_common.joints import JOINT_NAMES, JOINTS

OUT = Path(__file__).parent / "data" / "reference_fk.json"


def _urdf_model(folder: Path) -> mujoco.MjModel:
    text = (folder / "so101_new_calib.urdf").read_text()
    text = text.replace('filename="assets/', f'filename="{folder.as_posix()}/assets/')
    text = text.replace('<robot name="so101_new_calib">',
                        '<robot name="so101_new_calib"><mujoco><compiler fusestatic="false"/></mujoco>', 1)
    return mujoco.MjModel.from_xml_string(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, help="folder holding so101_new_calib.xml/.urdf and assets/")
    args = parser.parse_args()
    mjcf = mujoco.MjModel.from_xml_path(str(args.reference / "so101_new_calib.xml"))
    urdf = _urdf_model(args.reference)
    lower = np.array([j.lower for j in JOINTS])
    upper = np.array([j.upper for j in JOINTS])
    rng = np.random.default_rng(20250101)
    poses = [np.zeros(len(JOINTS)), lower, upper, *rng.uniform(lower, upper, size=(12, len(JOINTS)))]
    samples = []
    for q in poses:
        frames = []
        for model, kind in ((mjcf, "site"), (urdf, "body")):
            data = mujoco.MjData(model)
            for name, value in zip(JOINT_NAMES, q, strict=True):
                data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
            mujoco.mj_kinematics(model, data)
            frames.append(data.site("gripperframe") if kind == "site" else data.body("gripper_frame_link"))
        samples.append({"q": [round(float(v), 9) for v in q],
                        "position": [round(float(v), 9) for v in frames[0].xpos],
                        "rotation": [round(float(v), 9) for v in frames[1].xmat]})
    header = {"source": "SO-ARM100 Simulation/SO101 so101_new_calib (Apache-2.0)", "joint_names": list(JOINT_NAMES),
              "frame": "gripper_frame_link in base_link: position m, rotation row-major"}
    rows = ",\n  ".join(json.dumps(s) for s in samples)
    OUT.write_text(json.dumps(header)[:-1] + ',\n "samples": [\n  ' + rows + "\n ]\n}\n")
    print(f"wrote {len(samples)} poses to {OUT}")


if __name__ == "__main__":
    main()
