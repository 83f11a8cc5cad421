"""The search: which profile parameter values make the virtual arm reproduce the recordings.

Cost: per arm joint, the RMSE between the simulated and the recorded state (:func:`~.metrics.state_rmse`)
over fitting windows cut from the recordings (:func:`select_windows`: in each recording the window
where the commands move most, so a few seconds per motion carry its information); the first
``warmup`` seconds of each window, where the simulated firmware's set-point and the arm settle from
rest, are not scored.

Search: a coordinate search in ``log(value + floor)`` with shrinking steps (``FitConfig.steps``).
Arm-wide parameters take the move (up, down or none) that lowers the total cost, each joint's error
normalised by its error at the start. Per-joint parameters are searched for all arm joints at once:
one simulation with every joint's value moved up, one with every joint's moved down, and each joint
keeps what lowered *its own* error — the joints are coupled only through the arm's dynamics, weakly
enough that the combined move is then checked once and kept only if the total did not get worse.
So one round costs ``2·arm + 3·joint`` simulations whatever the number of joints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from so101_description.joints import ARM_JOINT_NAMES, JOINT_NAMES
from so101_virtual.profiles import GapProfile
from so101_virtual.sysid.metrics import state_rmse
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
    steps: tuple[float, ...] = (1.8, 1.35, 1.12)  # multiplicative step of each round
    window: float = 8.0  # s of each recording used for fitting
    warmup: float = 0.5  # s at the start of each window not scored

    def __post_init__(self) -> None:
        for name in (*self.arm_parameters, *self.joint_parameters):
            parameter(name)
        for name in self.arm_parameters:
            if parameter(name).section != "firmware":
                raise FitError(f"{name} is a per-joint parameter, not an arm-wide one")
        for name in self.joint_parameters:
            if parameter(name).section != "joint":
                raise FitError(f"{name} is an arm-wide parameter, not a per-joint one")
        if not self.steps or any(s <= 1.0 for s in self.steps):
            raise FitError(f"search steps must be factors above 1, got {list(self.steps)}")
        if not 0.0 <= self.warmup < self.window:
            raise FitError(f"warmup {self.warmup:g} s must be shorter than the window {self.window:g} s")


@dataclass
class FitResult:
    """The fitted profile, the values before and after, and the fitting cost (per arm joint, rad)."""

    profile: GapProfile
    initial: ParameterSet
    fitted: ParameterSet
    initial_error: np.ndarray  # (J,) state RMSE on the fitting windows with the base profile
    fitted_error: np.ndarray  # (J,) the same with the fitted profile
    simulations: int
    windows: list[str] = field(default_factory=list)  # names of the fitting windows
    history: list[float] = field(default_factory=list)  # total normalised cost after each accepted move


def select_windows(recordings: Sequence[Recording], window: float) -> list[Recording]:
    """From each recording, the ``window`` seconds in which the arm commands move most (summed
    absolute command change over the arm joints); a recording shorter than that is taken whole."""
    if not recordings:
        raise FitError("no recordings to fit on")
    out = []
    for rec in recordings:
        frames = max(10, int(round(window / rec.frame_period)))
        if frames >= len(rec.time):
            out.append(rec)
            continue
        motion = np.abs(np.diff(rec.command[:, _ARM], axis=0)).sum(axis=1)
        moving = np.concatenate([[0.0], np.cumsum(motion)])
        score = moving[frames - 1:] - moving[: len(moving) - frames + 1]
        start = int(np.argmax(score))
        out.append(rec.window(start, start + frames))
    return out


def planned_simulations(config: FitConfig) -> int:
    """How many simulations of the fitting windows :func:`fit_profile` runs."""
    return 1 + len(config.steps) * (2 * len(config.arm_parameters) + 3 * len(config.joint_parameters))


def simulate_all(profile: GapProfile, recordings: Sequence[Recording]) -> list[np.ndarray]:
    """The simulated states of every recording."""
    return [simulate(profile, rec) for rec in recordings]


class _Evaluator:
    def __init__(self, base: GapProfile, windows: Sequence[Recording], warmup: float,
                 progress: Callable[[int], None] | None) -> None:
        self.base = base
        self.windows = list(windows)
        self.skip = [min(len(w.time) - 1, int(round(warmup / w.frame_period))) for w in self.windows]
        self.progress = progress
        self.count = 0

    def __call__(self, values: ParameterSet) -> np.ndarray:
        profile = values.apply(self.base)
        sims = simulate_all(profile, self.windows)
        self.count += 1
        if self.progress is not None:
            self.progress(1)
        return state_rmse([s[k:] for s, k in zip(sims, self.skip, strict=True)],
                          [w.state[k:] for w, k in zip(self.windows, self.skip, strict=True)])


def fit_profile(base: GapProfile, recordings: Sequence[Recording], config: FitConfig = FitConfig(),
                progress: Callable[[int], None] | None = None,
                joint_names: Sequence[str] = ARM_JOINT_NAMES) -> FitResult:
    """Fit ``config``'s parameters of ``base`` to ``recordings`` (see the module docstring).
    ``progress(n)`` is called after every simulation of the fitting windows."""
    windows = select_windows(recordings, config.window)
    evaluate = _Evaluator(base, windows, config.warmup, progress)
    columns = [JOINT_NAMES.index(j) for j in joint_names]
    current = ParameterSet.from_profile(base, config.arm_parameters, config.joint_parameters, joint_names)
    initial = current.copy()
    cost = evaluate(current)
    initial_error = cost.copy()
    scale = np.maximum(initial_error[columns], 1e-6)

    def total(c: np.ndarray) -> float:
        return float(np.sum(c[columns] / scale))

    history = [total(cost)]
    for factor in config.steps:
        for name in config.arm_parameters:
            p = parameter(name)
            best, best_cost = current, cost
            for f in (factor, 1.0 / factor):
                moved = p.scaled(current.arm[name], f)
                if moved == current.arm[name]:
                    continue
                candidate = current.copy()
                candidate.arm[name] = moved
                c = evaluate(candidate)
                if total(c) < total(best_cost):
                    best, best_cost = candidate, c
            if best is not current:
                current, cost = best, best_cost
                history.append(total(cost))
        for name in config.joint_parameters:
            p = parameter(name)
            tries = [(current, cost)]
            for f in (factor, 1.0 / factor):
                candidate = current.with_joint_values(name, {j: p.scaled(current.joints[j][name], f)
                                                             for j in joint_names})
                tries.append((candidate, evaluate(candidate)))
            choice = {}
            for j, col in zip(joint_names, columns, strict=True):
                k = int(np.argmin([c[col] for _, c in tries]))
                choice[j] = tries[k][0].joints[j][name]
            combined = current.with_joint_values(name, choice)
            if combined.joints == current.joints:
                continue
            c = evaluate(combined)
            if total(c) <= total(cost):
                current, cost = combined, c
                history.append(total(cost))
    current = current.rounded()
    profile = current.apply(base)
    return FitResult(profile, initial, current, initial_error, cost, evaluate.count,
                     [w.name for w in windows], history)
