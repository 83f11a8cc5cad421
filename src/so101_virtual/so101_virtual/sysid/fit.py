"""The search: which profile parameter values make the virtual arm reproduce the recordings.

Cost: per arm joint, the RMSE between the simulated and the recorded state (:func:`~.metrics.state_rmse`)
over fitting windows cut from the recordings (:func:`select_windows`: in each recording the window
where the commands sweep widest, so a few seconds per motion carry its information); the first
``warmup`` seconds of each window, where the simulated firmware's set-point and the arm settle from
rest, are not scored. Plus, per arm joint, how many frames the simulated state runs behind the
recorded one (:func:`~.metrics.time_shift` pooled over the windows) weighted by ``lag_weight``: the
state error alone trades timing against amplitude and sag (on the real arm its optimum was an arm
1–2 frames slower than the physical one, with the right sag), and the lag is half of what a twin
must reproduce.

Search: Levenberg–Marquardt on the residuals (simulated − recorded state, each joint's divided by
its RMSE with the base profile, so every joint counts alike) in the coordinates ``log(value + floor)``
of the parameters (:mod:`.parameters`), within their bounds. The Jacobian is taken by forward
differences in few simulations by treating the joints as decoupled: one simulation per arm-wide
parameter (a full column), and one per per-joint parameter with *every* joint's value moved at once,
each joint's residual change giving that joint's own column (the joints are coupled only through the
arm's dynamics, weakly; the cross terms are left out of the Jacobian, and every step is accepted only
if the true cost falls). An iteration costs ``arm + joint`` simulations for the Jacobian and one per
trial step; up to ``reuse`` further steps reuse the Jacobian with the new residuals while they keep
lowering the cost (cheap progress where the cost falls slowly), and a rejected step is retried with
more damping. The cost does not depend on the number of joints. Friction and backlash make
the cost non-smooth: the differences are taken over ``delta`` (10 %), not infinitesimally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from so101_common.joints import ARM_JOINT_NAMES, JOINT_NAMES
from so101_virtual.profiles import GapProfile
from so101_virtual.sysid.metrics import time_shift
from so101_virtual.sysid.parameters import ARM_PARAMETERS, JOINT_PARAMETERS, ParameterSet, parameter
from so101_virtual.sysid.recording import Recording
from so101_virtual.sysid.simulate import simulate

__all__ = ["FitConfig", "FitResult", "FitError", "select_windows", "planned_simulations", "fit_profile",
           "simulate_all"]

_ARM = [JOINT_NAMES.index(n) for n in ARM_JOINT_NAMES]


class FitError(ValueError):
    """Nothing to fit on (no recordings, windows too short) or a configuration that cannot work."""


@dataclass(frozen=True)
class FitConfig:
    """What to fit and how hard to search."""

    arm_parameters: tuple[str, ...] = tuple(p.name for p in ARM_PARAMETERS)
    joint_parameters: tuple[str, ...] = tuple(p.name for p in JOINT_PARAMETERS)
    iterations: int = 6  # Levenberg–Marquardt iterations (each: one Jacobian, one or more trial steps)
    reuse: int = 2  # further steps taken with an iteration's Jacobian while they keep lowering the cost
    delta: float = 0.1  # finite-difference step in log(value + floor)
    window: float = 8.0  # s of each recording used for fitting
    warmup: float = 0.5  # s at the start of each window not scored
    # Cost of a one-frame time shift between simulated and recorded state, per joint, relative to that
    # joint's state error with the base profile (cost per joint: (state RMSE / base)² + (lag_weight · shift)²);
    # 0: the state error only
    lag_weight: float = 1.0

    def __post_init__(self) -> None:
        for name in (*self.arm_parameters, *self.joint_parameters):
            parameter(name)
        for name in self.arm_parameters:
            if parameter(name).section != "firmware":
                raise FitError(f"{name} is a per-joint parameter, not an arm-wide one")
        for name in self.joint_parameters:
            if parameter(name).section != "joint":
                raise FitError(f"{name} is an arm-wide parameter, not a per-joint one")
        if not self.arm_parameters and not self.joint_parameters:
            raise FitError("no parameters to fit")
        if self.iterations < 1:
            raise FitError(f"iterations must be 1 or more, got {self.iterations}")
        if self.reuse < 0:
            raise FitError(f"reuse must be 0 or more, got {self.reuse}")
        if not 0.0 < self.delta <= 1.0:
            raise FitError(f"delta must be in (0, 1], got {self.delta:g}")
        if not 0.0 <= self.warmup < self.window:
            raise FitError(f"warmup {self.warmup:g} s must be shorter than the window {self.window:g} s")
        if self.lag_weight < 0.0:
            raise FitError(f"lag_weight must be 0 or more, got {self.lag_weight:g}")


@dataclass
class FitResult:
    """The fitted profile, the values before and after, and the fitting cost (per arm joint, rad)."""

    profile: GapProfile
    initial: ParameterSet
    fitted: ParameterSet
    initial_error: np.ndarray  # (J,) state RMSE on the fitting windows with the base profile
    fitted_error: np.ndarray  # (J,) the same with the fitted profile
    initial_shift: np.ndarray  # (J,) frames the base profile's state runs behind the recorded one on the windows
    fitted_shift: np.ndarray  # (J,) the same with the fitted profile
    simulations: int
    windows: list[str] = field(default_factory=list)  # names of the fitting windows
    history: list[float] = field(default_factory=list)  # total normalised cost after each accepted move


def select_windows(recordings: Sequence[Recording], window: float) -> list[Recording]:
    """From each recording, the ``window`` seconds in which the arm commands sweep widest (their
    variance over the window, summed over the arm joints); a recording shorter than that is taken whole.

    Variance, not distance travelled: the command→state RMSE and lag the fit must reproduce are
    pooled over whole motions and so weighted by the commands' variance, i.e. by the large, slow
    sweeps where friction and the speed limit set the lag. The busiest few seconds (most distance
    travelled: small fast oscillations) showed the shipped profile's state within 0.5 frame of the
    recordings while on whole motions it lagged 1–2 frames more than the real arm."""
    if not recordings:
        raise FitError("no recordings to fit on")
    out = []
    for rec in recordings:
        frames = max(10, int(round(window / rec.frame_period)))
        if frames >= len(rec.time):
            out.append(rec)
            continue
        command = rec.command[:, _ARM] - rec.command[0, _ARM]  # offset: no cancellation in the sums
        total = np.concatenate([np.zeros((1, command.shape[1])), np.cumsum(command, axis=0)])
        squares = np.concatenate([np.zeros((1, command.shape[1])), np.cumsum(command**2, axis=0)])
        mean = (total[frames:] - total[:-frames]) / frames
        variance = ((squares[frames:] - squares[:-frames]) / frames - mean**2).sum(axis=1)
        start = int(np.argmax(variance))
        out.append(rec.window(start, start + frames))
    return out


_TRIALS = 3  # trial steps per iteration before giving up (damping raised after each rejection)


def planned_simulations(config: FitConfig) -> int:
    """The most simulations of the fitting windows :func:`fit_profile` can run (usually fewer: a
    step is mostly accepted at the first trial, and the search stops when no step helps)."""
    per_iteration = len(config.arm_parameters) + len(config.joint_parameters) + 1 + config.reuse + _TRIALS
    return 2 + config.iterations * per_iteration


def simulate_all(profile: GapProfile, recordings: Sequence[Recording]) -> list[np.ndarray]:
    """The simulated states of every recording."""
    return [simulate(profile, rec) for rec in recordings]


class _Evaluator:
    def __init__(self, base: GapProfile, windows: Sequence[Recording], warmup: float,
                 progress: Callable[[int], None] | None) -> None:
        self.base = base
        self.windows = list(windows)
        self.skip = [min(len(w.time) - 1, int(round(warmup / w.frame_period))) for w in self.windows]
        self.states = [w.state[k:] for w, k in zip(self.windows, self.skip, strict=True)]
        self.progress = progress
        self.count = 0

    def __call__(self, values: ParameterSet) -> tuple[np.ndarray, np.ndarray]:
        """(M, J) simulated minus recorded state over every scored frame of the windows, and the
        frames (J,) by which the simulated state runs behind the recorded one."""
        sims = [s[k:] for s, k in zip(simulate_all(values.apply(self.base), self.windows), self.skip, strict=True)]
        self.count += 1
        if self.progress is not None:
            self.progress(1)
        residuals = np.concatenate([s - state for s, state in zip(sims, self.states, strict=True)])
        return residuals, time_shift(sims, self.states)


class _Coordinates:
    """Parameter values ↔ the search vector ``u`` (arm-wide first, then per joint parameter × joint)."""

    def __init__(self, config: FitConfig, joint_names: Sequence[str]) -> None:
        self.arm = list(config.arm_parameters)
        self.joint = list(config.joint_parameters)
        self.joint_names = list(joint_names)
        params = [parameter(n) for n in self.arm] + [parameter(n) for n in self.joint for _ in self.joint_names]
        self.floor = np.array([p.floor for p in params])
        self.lower = np.log(np.array([p.lower for p in params]) + self.floor)
        self.upper = np.log(np.array([p.upper for p in params]) + self.floor)

    def vector(self, values: ParameterSet) -> np.ndarray:
        flat = [values.arm[n] for n in self.arm] + [values.joints[j][n] for n in self.joint for j in self.joint_names]
        return np.clip(np.log(np.array(flat) + self.floor), self.lower, self.upper)

    def values(self, u: np.ndarray) -> ParameterSet:
        flat = np.exp(np.clip(u, self.lower, self.upper)) - self.floor
        flat = np.where(flat < 1e-12, 0.0, flat).tolist()  # at the floor: zero, not a rounding residue
        out = ParameterSet({n: flat[i] for i, n in enumerate(self.arm)}, {j: {} for j in self.joint_names})
        i = len(self.arm)
        for n in self.joint:
            for j in self.joint_names:
                out.joints[j][n] = flat[i]
                i += 1
        return out

    def joint_index(self, k: int, j: int) -> int:
        """Index in ``u`` of per-joint parameter ``k`` of joint ``j``."""
        return len(self.arm) + k * len(self.joint_names) + j


def _levenberg_marquardt(residuals: Callable[[np.ndarray], np.ndarray], coords: _Coordinates, u: np.ndarray,
                         r: np.ndarray, scale: np.ndarray, config: FitConfig) -> tuple[np.ndarray, list[float]]:
    """Minimise the residuals ``r`` (rows, joints) at ``u``, each joint's divided by its ``scale``;
    returns the best ``u`` and the cost history."""

    def cost(res: np.ndarray) -> float:
        return float(np.mean((res / scale) ** 2))

    history = [cost(r)]
    damping = 1e-2
    n, joints = len(u), r.shape[1]
    for _ in range(config.iterations):
        # Jacobian (per joint: rows of that joint), forward differences away from the nearer bound
        derivative = np.zeros((n, r.shape[0], joints))  # d r[:, j] / d u[i], zero where decoupled
        for i in range(len(coords.arm)):
            step = config.delta if u[i] + config.delta <= coords.upper[i] else -config.delta
            moved = u.copy()
            moved[i] += step
            derivative[i] = (residuals(moved) - r) / step
        for k in range(len(coords.joint)):
            idx = [coords.joint_index(k, j) for j in range(joints)]
            steps = np.where(u[idx] + config.delta <= coords.upper[idx], config.delta, -config.delta)
            moved = u.copy()
            moved[idx] += steps
            change = residuals(moved) - r
            for j, i in enumerate(idx):
                derivative[i, :, j] = change[:, j] / steps[j]
        weighted = derivative / scale  # (n, M, J)
        hessian = np.einsum("amj,bmj->ab", weighted, weighted)
        accepted = rejected = 0
        # steps from this Jacobian (the residuals change, the slopes are kept: a step costs one simulation)
        while accepted <= config.reuse and rejected < _TRIALS:
            gradient = np.einsum("amj,mj->a", weighted, r / scale)
            delta = np.linalg.solve(hessian + damping * np.diag(np.diag(hessian) + 1e-9), -gradient)
            delta *= min(1.0, 1.0 / max(float(np.max(np.abs(delta))), 1e-12))  # at most ×e per step
            trial = np.clip(u + delta, coords.lower, coords.upper)
            r_trial = residuals(trial)
            if cost(r_trial) < cost(r):
                u, r = trial, r_trial
                damping = max(damping / 3.0, 1e-6)
                history.append(cost(r))
                accepted += 1
            else:
                damping *= 4.0
                rejected += 1
        if not accepted:
            break
    return u, history


def fit_profile(base: GapProfile, recordings: Sequence[Recording], config: FitConfig = FitConfig(),
                progress: Callable[[int], None] | None = None,
                joint_names: Sequence[str] = ARM_JOINT_NAMES) -> FitResult:
    """Fit ``config``'s parameters of ``base`` to ``recordings`` (see the module docstring).
    ``progress(n)`` is called after every simulation of the fitting windows."""
    windows = select_windows(recordings, config.window)
    evaluate = _Evaluator(base, windows, config.warmup, progress)
    initial = ParameterSet.from_profile(base, config.arm_parameters, config.joint_parameters, joint_names)
    coords = _Coordinates(config, joint_names)
    columns = [JOINT_NAMES.index(j) for j in joint_names]
    u = coords.vector(initial)
    start, initial_shift = evaluate(coords.values(u))
    initial_error = np.sqrt(np.mean(start**2, axis=0))
    scale = np.maximum(initial_error[columns], 1e-6)  # each joint counts alike
    # the shift as one more residual row per joint, sized so that its share of the mean cost is
    # (lag_weight · shift)² in units of the joint's base state error
    shift_row = config.lag_weight * np.sqrt(len(start)) * scale

    def stacked(state: np.ndarray, shift: np.ndarray) -> np.ndarray:
        return np.vstack([state[:, columns], shift_row * shift[columns]])

    def residuals(v: np.ndarray) -> np.ndarray:
        return stacked(*evaluate(coords.values(v)))

    u, history = _levenberg_marquardt(residuals, coords, u, stacked(start, initial_shift), scale, config)
    fitted = coords.values(u).rounded()
    fitted_state, fitted_shift = evaluate(fitted)
    return FitResult(fitted.apply(base), initial, fitted, initial_error, np.sqrt(np.mean(fitted_state**2, axis=0)),
                     initial_shift, fitted_shift, evaluate.count, [w.name for w in windows],
                     history)
