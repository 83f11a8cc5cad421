"""The URDF and the MJCF describe the same arm as the joint spec (and as the official description)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
from urdf_parser_py.urdf import URDF

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_description import paths

LINKS = ("base_link", "shoulder_link", "upper_arm_link", "lower_arm_link", "wrist_link", "gripper_link",
         "moving_jaw_so101_v1_link")
TOOL_LINK = "gripper_frame_link"
TOOL_SITE = "gripper_frame"
REFERENCE_FK = Path(__file__).parent / "data" / "reference_fk.json"


def _urdf_in_mujoco() -> mujoco.MjModel:
    """Our URDF through MuJoCo's URDF importer, keeping the tool link as its own body."""
    text = paths.urdf_text(absolute_mesh_paths=True)
    text = re.sub(r"(<robot [^>]*>)", r'\1<mujoco><compiler fusestatic="false" discardvisual="false"/></mujoco>',
                  text, count=1)
    return mujoco.MjModel.from_xml_string(text)


@pytest.fixture(scope="module")
def urdf() -> URDF:
    return URDF.from_xml_string(paths.urdf_text())


@pytest.fixture(scope="module")
def urdf_model() -> mujoco.MjModel:
    return _urdf_in_mujoco()


@pytest.fixture(scope="module")
def mjcf_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(paths.mjcf_path()))


def _pose(model: mujoco.MjModel, q: np.ndarray) -> mujoco.MjData:
    data = mujoco.MjData(model)
    for name, value in zip(JOINT_NAMES, q, strict=True):
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)
    return data


def _random_poses(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.uniform([j.lower for j in JOINTS], [j.upper for j in JOINTS], size=(n, len(JOINTS)))


# --- URDF --------------------------------------------------------------------------------------

def test_urdf_parses_with_urdfdom(urdf: URDF) -> None:
    assert urdf.name == "so101"
    assert urdf.get_root() == "base_link"
    assert {link.name for link in urdf.links} == {*LINKS, TOOL_LINK}
    movable = [j.name for j in urdf.joints if j.type != "fixed"]
    assert sorted(movable) == sorted(JOINT_NAMES)
    chain = urdf.get_chain("base_link", "gripper_frame_link", links=False)
    assert [j for j in chain if j in JOINT_NAMES] == list(JOINT_NAMES[:-1])  # the gripper is a side branch


def test_urdf_limits_match_joint_spec(urdf: URDF) -> None:
    joints = {j.name: j for j in urdf.joints}
    for spec in JOINTS:
        j = joints[spec.name]
        assert j.type == "revolute"
        assert j.limit.lower == pytest.approx(spec.lower, abs=1e-4)
        assert j.limit.upper == pytest.approx(spec.upper, abs=1e-4)
        assert j.limit.effort == pytest.approx(spec.max_effort, abs=1e-4)
        assert j.limit.velocity == pytest.approx(spec.max_velocity, abs=1e-4)


def test_urdf_meshes_resolve_to_shipped_files(urdf: URDF) -> None:
    names = [v.geometry.filename for link in urdf.links for v in link.visuals]
    assert names and all(n.startswith(paths.MESH_URI_PREFIX) for n in names)
    for name in names:
        assert (paths.meshes_dir() / name.removeprefix(paths.MESH_URI_PREFIX)).is_file(), name
    absolute = URDF.from_xml_string(paths.urdf_text(absolute_mesh_paths=True))
    files = [Path(v.geometry.filename) for link in absolute.links for v in link.visuals]
    assert all(f.is_absolute() and f.is_file() for f in files)
    assert paths.MESH_URI_PREFIX not in paths.urdf_text(absolute_mesh_paths=True)


def test_urdf_loads_in_mujoco(urdf_model: mujoco.MjModel) -> None:
    assert urdf_model.njnt == len(JOINTS)
    assert {urdf_model.body(i).name for i in range(1, urdf_model.nbody)} == {*LINKS, TOOL_LINK}


# --- MJCF --------------------------------------------------------------------------------------

def test_mjcf_joint_names_order_and_ranges(mjcf_model: mujoco.MjModel) -> None:
    assert tuple(mjcf_model.joint(i).name for i in range(mjcf_model.njnt)) == JOINT_NAMES
    assert mjcf_model.nq == mjcf_model.nv == len(JOINTS)
    for i, spec in enumerate(JOINTS):
        assert mjcf_model.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE
        assert mjcf_model.jnt_limited[i]
        np.testing.assert_allclose(mjcf_model.jnt_range[i], [spec.lower, spec.upper], atol=1e-4)


def test_mjcf_base_has_no_actuators_floor_or_light(mjcf_model: mujoco.MjModel) -> None:
    assert mjcf_model.nu == 0
    assert mjcf_model.nlight == 0
    assert mujoco.mjtGeom.mjGEOM_PLANE not in set(mjcf_model.geom_type)
    assert {mjcf_model.body(i).name for i in range(1, mjcf_model.nbody)} == set(LINKS)
    assert mjcf_model.site(TOOL_SITE).bodyid == mjcf_model.body("gripper_link").id


def test_mjcf_visual_meshes_never_collide(mjcf_model: mujoco.MjModel) -> None:
    meshes = mjcf_model.geom_type == mujoco.mjtGeom.mjGEOM_MESH
    assert meshes.sum() == 17
    assert not mjcf_model.geom_contype[meshes].any() and not mjcf_model.geom_conaffinity[meshes].any()
    boxes = mjcf_model.geom_type == mujoco.mjtGeom.mjGEOM_BOX
    assert boxes.sum() == 16 and mjcf_model.geom_contype[boxes].all()


def test_mjcf_no_self_contact_at_zero_pose(mjcf_model: mujoco.MjModel) -> None:
    data = mujoco.MjData(mjcf_model)
    mujoco.mj_forward(mjcf_model, data)
    assert data.ncon == 0


def test_position_variant_servos_every_joint_over_its_range() -> None:
    model = mujoco.MjModel.from_xml_path(str(paths.mjcf_path("position")))
    assert tuple(model.actuator(i).name for i in range(model.nu)) == JOINT_NAMES
    for i, spec in enumerate(JOINTS):
        assert model.joint(model.actuator_trnid[i, 0]).name == spec.name
        np.testing.assert_allclose(model.actuator_ctrlrange[i], [spec.lower, spec.upper], atol=1e-9)
        assert model.actuator_gainprm[i, 0] == pytest.approx(998.22)
        assert model.actuator_biasprm[i, 1:3] == pytest.approx([-998.22, -2.731])
        np.testing.assert_allclose(model.actuator_forcerange[i], [-3.35, 3.35])
    # The servos hold a pose against gravity.
    data = mujoco.MjData(model)
    target = np.array([0.3, -0.5, 0.6, 0.4, -0.2, 0.5])
    data.qpos[:] = data.ctrl[:] = target
    mujoco.mj_step(model, data, nstep=500)
    np.testing.assert_allclose(data.qpos, target, atol=0.01)


def test_scene_variant_floor_does_not_collide() -> None:
    model = mujoco.MjModel.from_xml_path(str(paths.mjcf_path("scene")))
    floor = model.geom("floor")
    assert floor.contype == 0 and floor.conaffinity == 0
    assert model.nu == len(JOINTS)


def test_mjcf_loads_through_mjspec_for_programmatic_actuators() -> None:
    spec = mujoco.MjSpec.from_file(str(paths.mjcf_path()))
    for name in JOINT_NAMES:
        spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)  # a plain motor
    model = spec.compile()
    assert model.nu == len(JOINTS)
    data = mujoco.MjData(model)
    mujoco.mj_step(model, data)


# --- URDF vs MJCF vs joint spec ----------------------------------------------------------------

def test_joint_axes_agree_in_world_frame(urdf: URDF, urdf_model: mujoco.MjModel, mjcf_model: mujoco.MjModel) -> None:
    zero = np.zeros(len(JOINTS))
    du, dm = _pose(urdf_model, zero), _pose(mjcf_model, zero)
    parsed = {j.name: j for j in urdf.joints}
    for name in JOINT_NAMES:
        np.testing.assert_allclose(du.xaxis[urdf_model.joint(name).id], dm.xaxis[mjcf_model.joint(name).id], atol=1e-4)
        np.testing.assert_allclose(du.xanchor[urdf_model.joint(name).id], dm.xanchor[mjcf_model.joint(name).id],
                                   atol=1e-6)
        np.testing.assert_allclose(parsed[name].axis, mjcf_model.jnt_axis[mjcf_model.joint(name).id], atol=1e-9)


def test_joint_limits_agree_across_urdf_mjcf_and_spec(urdf_model: mujoco.MjModel, mjcf_model: mujoco.MjModel) -> None:
    for spec in JOINTS:
        expected = [spec.lower, spec.upper]
        np.testing.assert_allclose(urdf_model.jnt_range[urdf_model.joint(spec.name).id], expected, atol=1e-4)
        np.testing.assert_allclose(mjcf_model.jnt_range[mjcf_model.joint(spec.name).id], expected, atol=1e-4)


def test_inertials_agree(urdf_model: mujoco.MjModel, mjcf_model: mujoco.MjModel) -> None:
    for link in LINKS:
        a, b = urdf_model.body(link), mjcf_model.body(link)
        assert a.mass[0] == pytest.approx(b.mass[0], rel=1e-9), link
        np.testing.assert_allclose(a.ipos, b.ipos, atol=1e-9, err_msg=link)
        np.testing.assert_allclose(a.inertia, b.inertia, rtol=1e-6, atol=1e-12, err_msg=link)
    assert sum(mjcf_model.body(link).mass[0] for link in LINKS) == pytest.approx(0.632006)


def test_forward_kinematics_agree_at_random_poses(urdf_model: mujoco.MjModel, mjcf_model: mujoco.MjModel) -> None:
    for q in [np.zeros(len(JOINTS)), *_random_poses(50)]:
        du, dm = _pose(urdf_model, q), _pose(mjcf_model, q)
        np.testing.assert_allclose(du.body(TOOL_LINK).xpos, dm.site(TOOL_SITE).xpos, atol=1e-6)
        np.testing.assert_allclose(du.body(TOOL_LINK).xmat, dm.site(TOOL_SITE).xmat, atol=1e-6)
        for link in LINKS:
            np.testing.assert_allclose(du.body(link).xpos, dm.body(link).xpos, atol=1e-6, err_msg=link)
            np.testing.assert_allclose(du.body(link).xmat, dm.body(link).xmat, atol=1e-6, err_msg=link)


def test_forward_kinematics_match_the_official_description(urdf_model: mujoco.MjModel,
                                                           mjcf_model: mujoco.MjModel) -> None:
    fixture = json.loads(REFERENCE_FK.read_text())
    assert tuple(fixture["joint_names"]) == JOINT_NAMES
    for sample in fixture["samples"]:
        q = np.array(sample["q"])
        for data, frame in ((_pose(mjcf_model, q).site(TOOL_SITE), "mjcf"), (_pose(urdf_model, q).body(TOOL_LINK), "urdf")):
            np.testing.assert_allclose(data.xpos, sample["position"], atol=1e-5, err_msg=frame)
            np.testing.assert_allclose(data.xmat, sample["rotation"], atol=1e-4, err_msg=frame)


def test_mjcf_and_urdf_name_the_same_meshes() -> None:
    mjcf_meshes = {m.get("file") for m in ET.parse(paths.mjcf_path()).getroot().iter("mesh")}
    urdf_meshes = {Path(m.get("filename", "")).name for m in ET.fromstring(paths.urdf_text()).iter("mesh")}
    assert mjcf_meshes == urdf_meshes
    assert mjcf_meshes == {p.name for p in paths.meshes_dir().glob("*.stl")}


def test_urdf_kinematics_match_the_official_description_and_mujoco(mjcf_model: mujoco.MjModel) -> None:
    """so101_description.kinematics (the web view's arm) against the official figures and MuJoCo's FK."""
    from so101_description.kinematics import UrdfArm

    arm = UrdfArm.load()
    assert arm.movable_joints == JOINT_NAMES and arm.root == "base_link"
    assert {v.mesh.name for visuals in arm.visuals.values() for v in visuals} == \
        {p.name for p in paths.meshes_dir().glob("*.stl")}
    assert all(v.mesh.is_file() for visuals in arm.visuals.values() for v in visuals)
    fixture = json.loads(REFERENCE_FK.read_text())
    for sample in fixture["samples"]:
        tool = arm.link_poses(dict(zip(JOINT_NAMES, sample["q"], strict=True)))[TOOL_LINK]
        np.testing.assert_allclose(tool[:3, 3], sample["position"], atol=1e-5)
        np.testing.assert_allclose(tool[:3, :3].ravel(), sample["rotation"], atol=1e-4)
    for q in _random_poses(20, seed=11):
        poses, data = arm.link_poses(dict(zip(JOINT_NAMES, q, strict=True))), _pose(mjcf_model, q)
        for link in LINKS:
            np.testing.assert_allclose(poses[link][:3, 3], data.body(link).xpos, atol=1e-6, err_msg=link)
            np.testing.assert_allclose(poses[link][:3, :3].ravel(), data.body(link).xmat, atol=1e-6, err_msg=link)
