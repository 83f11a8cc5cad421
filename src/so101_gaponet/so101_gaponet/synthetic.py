"""A documented, simple synthetic real arm paired with an ideal sim: training fixtures with a known gap.

Real arm, per joint, one update per control step ``dt`` (command ``c`` issued at step ``i``
acts from step ``i+1`` on):

1. servo lag: the motor side follows the command as a first-order lag,
   ``m ← m + α (c − m)``, ``α = 1 − exp(−dt/τ)``;
2. backlash: the link moves only when the motor leaves a dead band of width ``b`` around it;
3. gravity sag (shoulder_lift, elbow_flex): the measured position sits ``g·sin(θ)`` below the link
   target, θ the link's angle (shoulder_lift) or the sum of shoulder_lift and elbow_flex (elbow).

The sim follows the command one step late (a stiff position servo). Profiles pick the figures:
``lag`` has only the lag (its inverse is known in closed form, for tests), ``default`` has all three
with a 100 ms lag and sag of a few hundredths of a rad, the size measured on real SO-101 recordings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from so101_description.joints import JOINT_NAMES, JOINTS
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.paired_data import Episode, causal_velocity, write_dataset
from so101_gaponet.runtime import GapModel

__all__ = ["ArmProfile", "PROFILES", "simulate_real", "tracking_rms", "make_command", "make_dataset"]


@dataclass(frozen=True)
class ArmProfile:
    """Figures of the synthetic real arm."""

    name: str
    lag_s: float  # first-order time constant τ of the servo response, s (0 = none)
    backlash_rad: float  # dead band width b, rad
    sag_rad: float  # gravity sag amplitude g on shoulder_lift and elbow_flex, rad

    def __post_init__(self) -> None:
        if self.lag_s < 0 or self.backlash_rad < 0 or self.sag_rad < 0:
            raise ValueError(f"profile {self.name}: figures must be ≥ 0")


PROFILES: dict[str, ArmProfile] = {
    "lag": ArmProfile("lag", lag_s=0.06, backlash_rad=0.0, sag_rad=0.0),
    "default": ArmProfile("default", lag_s=0.1, backlash_rad=math.radians(1.0), sag_rad=0.03),
}

_LIFT, _ELBOW = JOINT_NAMES.index("shoulder_lift"), JOINT_NAMES.index("elbow_flex")


def simulate_real(command: np.ndarray, rate_hz: float, profile: ArmProfile, start: np.ndarray | None = None,
                  compensator: Compensator | None = None) -> np.ndarray:
    """Measured positions (N×J) of the synthetic real arm driven by ``command`` (N×J).

    With a ``compensator`` the loop is closed as deployed: each step the arm's measured state goes
    to ``update_measured`` and the arm receives ``compensate(command[i])`` instead of the command.
    """
    dt = 1.0 / rate_hz
    alpha = 1.0 - math.exp(-dt / profile.lag_s) if profile.lag_s > 0 else 1.0
    half = profile.backlash_rad / 2
    motor = np.array(command[0] if start is None else start, dtype=np.float64)
    link = motor.copy()
    out = np.empty_like(command)
    for i in range(len(command)):
        sag = np.zeros(command.shape[1])
        sag[_LIFT] = profile.sag_rad * math.sin(link[_LIFT])
        sag[_ELBOW] = profile.sag_rad * math.sin(link[_LIFT] + link[_ELBOW])
        out[i] = link - sag
        applied = command[i]
        if compensator is not None:
            velocity = (out[i] - out[i - 1]) * rate_hz if i else np.zeros(command.shape[1])
            compensator.update_measured(out[i], velocity, stamp=i * dt)
            applied = compensator.compensate(command[i], now=i * dt).command
        motor += alpha * (applied - motor)
        link = np.clip(link, motor - half, motor + half)
    return out


def tracking_rms(model: GapModel, profile: str = "default", seconds: float = 10.0, rate_hz: float = 50.0,
                 seed: int = 11, settle: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Per-joint RMS distance (rad) of the synthetic real arm from the ideal sim, (uncompensated, compensated)."""
    command = make_command(int(round(seconds * rate_hz)), rate_hz, np.random.default_rng(seed))
    ideal = np.vstack([command[:1], command[:-1]])
    plain = simulate_real(command, rate_hz, PROFILES[profile])
    compensated = simulate_real(command, rate_hz, PROFILES[profile],
                                compensator=Compensator(CompensatorConfig(joints=JOINT_NAMES), model))

    def rms(real: np.ndarray) -> np.ndarray:
        return np.sqrt(np.mean((real[settle:] - ideal[settle:]) ** 2, axis=0))

    return rms(plain), rms(compensated)


def make_command(samples: int, rate_hz: float, rng: np.random.Generator, amplitude: float = 0.4) -> np.ndarray:
    """Smooth random command trajectories: a few sines per joint within ``amplitude`` of each range."""
    t = np.arange(samples) / rate_hz
    command = np.empty((samples, len(JOINTS)))
    for j, spec in enumerate(JOINTS):
        centre = (spec.lower + spec.upper) / 2
        signal = np.zeros(samples)
        for _ in range(3):
            freq = rng.uniform(0.05, 0.8)
            signal += rng.uniform(0.3, 1.0) * np.sin(2 * np.pi * freq * t + rng.uniform(0, 2 * np.pi))
        signal /= np.max(np.abs(signal)) + 1e-9
        command[:, j] = centre + amplitude * spec.span / 2 * signal
    return command


def make_dataset(path: str | Path, profile: str = "default", episodes: int = 6, seconds: float = 20.0,
                 rate_hz: float = 50.0, seed: int = 0) -> Path:
    """Write a paired dataset of the synthetic real arm (``profile``) beside an ideal sim."""
    try:
        arm = PROFILES[profile]
    except KeyError as err:
        raise ValueError(f"unknown profile {profile!r}; expected one of {list(PROFILES)}") from err
    rng = np.random.default_rng(seed)
    samples = int(round(seconds * rate_hz))
    written = []
    for index in range(episodes):
        command = make_command(samples, rate_hz, rng)
        real = simulate_real(command, rate_hz, arm)
        sim = np.vstack([command[:1], command[:-1]])
        time = np.arange(samples) / rate_hz
        nan = np.full_like(command, np.nan)
        arrays = {
            "command": command,
            "real_position": real, "real_velocity": causal_velocity(real, time), "real_effort": nan,
            "sim_position": sim, "sim_velocity": causal_velocity(sim, time), "sim_effort": nan,
        }
        written.append(Episode(f"synthetic_{profile}_{index:03d}", time, arrays))
    extra = {"source": "so101_gaponet.synthetic", "profile": profile, "seed": seed,
             "real_arm": {"lag_s": arm.lag_s, "backlash_rad": arm.backlash_rad, "sag_rad": arm.sag_rad}}
    return write_dataset(path, rate_hz, JOINT_NAMES, written, extra)
