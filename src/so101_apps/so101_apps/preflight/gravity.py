"""Is the calibration the URDF's? Direction and zero of each gravity-loaded joint from its load (no rclpy).

The reference that a wrong calibration cannot fool is gravity. The driver reports each joint's position and its
load (Present_Load as N·m along the joint axis, signed by the calibration's direction, like the position). Holding
or moving slowly, a servo's load is the gravity torque on its joint (the URDF's masses at the true pose) plus
friction, which opposes the motion. Sweeping one joint up and then down through the same angles at constant
speed separates the two (friction flips sign with the motion, gravity does not), and what is left can be set
against the URDF:

* the gravity torque on a joint with a horizontal axis, as that joint turns with the others held, is exactly a
  sinusoid ``A·cos(q + c)`` of its angle (the links beyond it turn rigidly about the axis); ``A`` and ``c`` come
  from the URDF at the others' angles;
* the sweep's load, fitted with ``a·cos q + b·sin q + f·direction``, is the same sinusoid scaled by the unknown
  ratio of Present_Load to torque (``k > 0``, near 1), shifted by the calibration's zero error ``o`` (the arm is
  at ``q + o`` when it reports ``q``): the fitted phase minus ``c`` is ``o``, whatever ``k`` is;
* a reversed direction flips both the reported angle and the reported load: the sweep then fits
  ``−A·cos(−q + o + c)``, which the same phase tells apart (``o`` of the other hypothesis is small).

The upper joints' errors move the lower links (and the lower links' errors move the arm's centre of mass), so the
three joints are solved together: each joint's ``c`` is computed at the others' true angles under their current
estimates, until the estimates settle. The sweeps must be wide enough for the phase to show (:mod:`.motion_plan`).
Joints whose axis gravity does not load (pan: vertical; roll and gripper: a few mN·m) cannot be checked this way.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import mujoco
import numpy as np

from so101_apps.preflight.motion_plan import GRAVITY_JOINTS, Plan, Recording
from so101_common.joints import JOINT_NAMES
from so101_description.paths import urdf_text

__all__ = ["GravityModel", "UrdfJoint", "urdf_joints", "JointEstimate", "estimate_calibration", "CRUISE_FRACTION", "REACH_RAD"]

CRUISE_FRACTION = 0.5  # a sweep's sample counts when its joint moves the sweep's way at least this share of its speed
REACH_RAD = 0.1  # a sweep counts when its joint came this close to both of its ends
_MIN_SAMPLES = 30  # per sweep (up and down together): fewer, and the joint is not judged
_HUBER_K = 1.345  # Huber's constant: 95 % efficiency on Gaussian noise, bounded influence of the load's spikes
_HUBER_ITERATIONS = 50
_ITERATIONS = 8
SURE_SIGMA_RAD = 0.15  # a zero estimate at least this sure is used for the other joints (and judged)
DECIDED_SIGMAS = 3.0  # the direction is told apart when the other hypothesis's zero is this many σ further off
FEED_RAD = 0.35  # ... and only when it is this far off: a smaller estimate is as likely noise as a zero error
LOAD_SCALE_RANGE = (0.3, 3.0)  # fitted load amplitude / URDF gravity amplitude outside this: not gravity


@dataclass(frozen=True)
class UrdfJoint:
    name: str
    lower: float  # rad
    upper: float  # rad
    velocity: float  # rad/s
    effort: float  # N·m


def urdf_joints() -> dict[str, UrdfJoint]:
    """The URDF's revolute joints (limits, velocity, effort) by name."""
    root = ET.fromstring(urdf_text())
    out = {}
    for element in root.iter("joint"):
        limit = element.find("limit")
        if element.get("type") == "revolute" and limit is not None:
            name = str(element.get("name"))
            out[name] = UrdfJoint(name, float(limit.get("lower", "nan")), float(limit.get("upper", "nan")),
                                  float(limit.get("velocity", "nan")), float(limit.get("effort", "nan")))
    return out


class GravityModel:
    """The URDF's arm in MuJoCo: the torque each joint's motor needs to hold a pose against gravity."""

    def __init__(self) -> None:
        text = re.sub(r"(<robot [^>]*>)", r'\1<mujoco><compiler discardvisual="true"/></mujoco>',
                      urdf_text(absolute_mesh_paths=True), count=1)
        self.model = mujoco.MjModel.from_xml_string(text)
        self.data = mujoco.MjData(self.model)
        self._qpos = np.array([self.model.jnt_qposadr[self.model.joint(n).id] for n in JOINT_NAMES])
        self._dof = np.array([self.model.jnt_dofadr[self.model.joint(n).id] for n in JOINT_NAMES])

    def torque(self, q: np.ndarray) -> np.ndarray:
        """N·m per joint (:data:`JOINT_NAMES` order) holding pose ``q`` (rad): ``qfrc_bias`` at rest."""
        self.data.qpos[:] = 0.0
        self.data.qpos[self._qpos] = q
        self.data.qvel[:] = 0.0
        mujoco.mj_forward(self.model, self.data)
        return self.data.qfrc_bias[self._dof].copy()

    def sinusoid(self, q: np.ndarray, joint: int) -> tuple[float, float]:
        """``(A, c)`` with the torque on ``joint`` = ``A·cos(q_joint + c)`` while the other joints stay at ``q``."""
        at = np.array(q, dtype=float)
        at[joint] = 0.0
        g0 = self.torque(at)[joint]  # A·cos c
        at[joint] = math.pi / 2
        g1 = self.torque(at)[joint]  # −A·sin c
        return math.hypot(g0, g1), math.atan2(-g1, g0)


@dataclass(frozen=True)
class JointEstimate:
    """What the sweeps say of one gravity-loaded joint's calibration."""

    joint: str
    direction: int  # +1: as the URDF; −1: reversed
    offset: float  # rad, the arm's true angle minus the reported one (the calibration's zero error)
    offset_sigma: float  # rad, one standard deviation of ``offset`` from the fit
    other_offset: float  # rad, ``offset`` had the direction been the other one
    scale: float  # fitted load amplitude / the URDF's gravity amplitude (Present_Load per torque; ≈ 1)
    gravity: float  # N·m, the URDF's gravity torque on the joint at the check pose
    measured: float  # N·m, the measured gravity load (friction removed) at the check pose
    friction: float  # N·m, half the difference between the loads moving up and moving down
    samples: int  # samples the fit used

    @property
    def direction_decided(self) -> bool:
        return abs(self.other_offset) - abs(self.offset) > DECIDED_SIGMAS * self.offset_sigma

    @property
    def sure(self) -> bool:
        return self.offset_sigma <= SURE_SIGMA_RAD and LOAD_SCALE_RANGE[0] <= self.scale <= LOAD_SCALE_RANGE[1]

    def to_dict(self) -> dict[str, float | int | str]:
        return {"direction": self.direction, "offset_rad": round(self.offset, 4),
                "offset_sigma_rad": round(self.offset_sigma, 4), "other_direction_offset_rad": round(self.other_offset, 4),
                "load_scale": round(self.scale, 3), "gravity_nm": round(self.gravity, 4),
                "measured_nm": round(self.measured, 4), "friction_nm": round(self.friction, 4), "samples": self.samples}


@dataclass(frozen=True)
class _Fit:
    median_pose: np.ndarray  # the joints' reported angles during the sweep (the swept one varies)
    a: float
    b: float
    friction: float
    phase: float  # θ with a·cos q + b·sin q = R·cos(q + θ)
    phase_sigma: float
    amplitude: float  # R
    samples: int


def _wrap(x: float) -> float:
    return (x + math.pi) % (2 * math.pi) - math.pi


def _fit_sweep(position: np.ndarray, effort: np.ndarray, direction: np.ndarray, joint: int) -> _Fit | None:
    """The sinusoid and friction of one joint's sweep samples, or None with too few of them.

    Least squares with Huber weights (iteratively reweighted): a servo's load has spikes (its position loop kicking
    after a stick), which a plain least-squares fit would follow. The phase's standard deviation comes from the
    robust residual scale (MAD) and the fit's design.
    """
    if len(direction) < _MIN_SAMPLES or len(set(direction.tolist())) < 2:
        return None
    q = position[:, joint]
    x = np.column_stack([np.cos(q), np.sin(q), direction.astype(float)])
    weights: np.ndarray = np.ones(len(effort))
    coef: np.ndarray = np.zeros(3)
    residual = effort.copy()
    scale = 1.0
    for _ in range(_HUBER_ITERATIONS):
        root = np.sqrt(weights)
        coef = np.linalg.lstsq(x * root[:, None], effort * root, rcond=None)[0]
        residual = effort - x @ coef
        scale = max(1.4826 * float(np.median(np.abs(residual - np.median(residual)))), 1e-9)
        bound = _HUBER_K * scale
        updated = np.where(np.abs(residual) <= bound, 1.0, bound / np.maximum(np.abs(residual), 1e-12))
        converged = np.allclose(updated, weights, atol=1e-6)
        weights = updated
        if converged:
            break
    psi = np.clip(residual / scale, -_HUBER_K, _HUBER_K)
    inliers = max(float(np.mean(np.abs(residual / scale) <= _HUBER_K)), 1e-3)
    variance = scale**2 * float(np.sum(psi**2)) / max(len(effort) - 3, 1) / inliers**2  # Huber's asymptotic variance
    covariance = variance * np.linalg.pinv(x.T @ x)
    a, b, friction = (float(c) for c in coef)
    r2 = a * a + b * b
    if r2 <= 0.0:
        return None
    gradient = np.array([b / r2, -a / r2, 0.0])  # of θ = atan2(−b, a)
    sigma = float(math.sqrt(max(float(gradient @ covariance @ gradient), 0.0)))
    return _Fit(np.median(position, axis=0), a, b, friction, math.atan2(-b, a), sigma, math.sqrt(r2), len(effort))


def _sweep_samples(recording: Recording, plan: Plan, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, efforts and directions of the samples taken while ``name`` swept at constant speed: the joint's
    measured velocity has the sweep's sign and at least :data:`CRUISE_FRACTION` of its speed (the arm has caught up
    with the command, however late its joint states come). None when the joint did not reach both ends of its sweep
    within :data:`REACH_RAD` (blocked, or held at a limit: its load then says nothing of gravity)."""
    time, position, velocity, effort = recording.arrays()
    j = JOINT_NAMES.index(name)
    legs = [leg for leg in plan.legs if leg.sweeps == name]
    on_sweep = np.array([plan.legs[plan.locate(float(t))[0]].sweeps == name for t in time], dtype=bool)
    swept = position[on_sweep & np.isfinite(position[:, j]), j]
    low, high = min(min(leg.start[j], leg.end[j]) for leg in legs), max(max(leg.start[j], leg.end[j]) for leg in legs)
    if not len(swept) or swept.min() > low + REACH_RAD or swept.max() < high - REACH_RAD:
        return position[:0], effort[:0], np.zeros(0)
    keep, direction = [], []
    for k, t in enumerate(time):
        if not on_sweep[k] or not np.all(np.isfinite(position[k])):
            continue
        leg = plan.legs[plan.locate(float(t))[0]]
        speed = abs(leg.end[j] - leg.start[j]) / leg.duration
        if leg.direction * velocity[k, j] >= CRUISE_FRACTION * speed:
            keep.append(k)
            direction.append(leg.direction)
    return position[keep], effort[keep], np.asarray(direction)


def estimate_calibration(recording: Recording, plan: Plan, model: GravityModel) -> dict[str, JointEstimate | None]:
    """Each gravity joint's direction and zero error from the sweeps of ``plan`` (None: too few samples)."""
    fits: dict[str, _Fit] = {}
    for name in GRAVITY_JOINTS:
        j = JOINT_NAMES.index(name)
        position, effort, direction = _sweep_samples(recording, plan, name)
        if len(direction):
            fit = _fit_sweep(position, effort[:, j], direction, j)
            if fit is not None:
                fits[name] = fit
    sign = {name: 1 for name in GRAVITY_JOINTS}
    offset = {name: 0.0 for name in GRAVITY_JOINTS}
    other = {name: 0.0 for name in GRAVITY_JOINTS}
    shape: dict[str, tuple[float, float]] = {}
    # what the other joints' models take of a joint's estimate: its direction once the two hypotheses are told apart,
    # its zero only while its own fit is sure of it (a noisy wrist would otherwise drag the elbow and lift along)
    feed_sign = dict(sign)
    feed_offset = dict(offset)

    def true_pose(reported: np.ndarray, skip: str) -> np.ndarray:
        pose = reported.copy()
        for name in GRAVITY_JOINTS:
            if name != skip:
                k = JOINT_NAMES.index(name)
                pose[k] = feed_sign[name] * pose[k] + feed_offset[name]
        return pose

    for _ in range(_ITERATIONS):
        for name, fit in fits.items():
            j = JOINT_NAMES.index(name)
            amplitude, c = model.sinusoid(true_pose(fit.median_pose, name), j)
            same, flipped = _wrap(fit.phase - c), _wrap(math.pi - fit.phase - c)
            if abs(same) <= abs(flipped):
                sign[name], offset[name], other[name] = 1, same, flipped
            else:
                sign[name], offset[name], other[name] = -1, flipped, same
            shape[name] = (amplitude, c)
            scale = fit.amplitude / amplitude if amplitude > 0 else math.nan
            decided = abs(other[name]) - abs(offset[name]) > DECIDED_SIGMAS * fit.phase_sigma
            sure = fit.phase_sigma <= SURE_SIGMA_RAD and LOAD_SCALE_RANGE[0] <= scale <= LOAD_SCALE_RANGE[1]
            feed_sign[name] = sign[name] if decided else 1
            feed_offset[name] = offset[name] if decided and sure and abs(offset[name]) > FEED_RAD else 0.0
    estimates: dict[str, JointEstimate | None] = {name: None for name in GRAVITY_JOINTS}
    for name, fit in fits.items():
        j = JOINT_NAMES.index(name)
        amplitude, _ = shape[name]
        reported = fit.median_pose[j]
        measured = fit.a * math.cos(reported) + fit.b * math.sin(reported)
        gravity = float(model.torque(fit.median_pose)[j])
        estimates[name] = JointEstimate(name, sign[name], offset[name], fit.phase_sigma, other[name],
                                        fit.amplitude / amplitude if amplitude > 0 else math.nan, gravity, measured,
                                        abs(fit.friction), fit.samples)
    return estimates
