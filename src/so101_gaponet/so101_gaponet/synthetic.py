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

from so101_common.joints import JOINT_NAMES, JOINTS
from so101_common.paired_dataset import PairedDataset, PairedEpisode
from so101_common.trajectory import causal_velocity
from so101_gaponet.compensator import Compensator, CompensatorConfig
from so101_gaponet.runtime import GapModel

__all__ = ["ArmProfile", "PROFILES", "ClosedLoopCheck", "closed_loop_check", "simulate_real", "simulate_closed_loop",
           "tracking_rms", "make_command", "make_dataset"]


@dataclass(frozen=True)
class ArmProfile:
    """Figures of the synthetic real arm."""

    name: str
    lag_s: float  # first-order time constant τ of the servo response, s (0 = none)
    backlash_rad: float  # dead band width b, rad
    sag_rad: float  # gravity sag amplitude g on shoulder_lift and elbow_flex, rad
    delay_steps: int = 0  # extra dead time between a command and its effect (bus, driver, DDS), steps

    def __post_init__(self) -> None:
        if self.lag_s < 0 or self.backlash_rad < 0 or self.sag_rad < 0 or self.delay_steps < 0:
            raise ValueError(f"profile {self.name}: figures must be ≥ 0")


PROFILES: dict[str, ArmProfile] = {
    "lag": ArmProfile("lag", lag_s=0.06, backlash_rad=0.0, sag_rad=0.0),
    "default": ArmProfile("default", lag_s=0.1, backlash_rad=math.radians(1.0), sag_rad=0.03),
    # Not a training arm: a stiff servo behind two steps of dead time, like the virtual SO-101 seen through
    # driver and DDS. A compensator trained on ``default`` must not destabilise it.
    "stiff_delayed": ArmProfile("stiff_delayed", lag_s=0.02, backlash_rad=0.0, sag_rad=0.0, delay_steps=2),
}

_LIFT, _ELBOW = JOINT_NAMES.index("shoulder_lift"), JOINT_NAMES.index("elbow_flex")


def simulate_real(command: np.ndarray, rate_hz: float, profile: ArmProfile, start: np.ndarray | None = None,
                  compensator: Compensator | None = None) -> np.ndarray:
    """Measured positions (N×J) of the synthetic real arm driven by ``command`` (N×J).

    With a ``compensator`` the loop is closed as deployed: each step the arm's measured state goes
    to ``update_measured`` and the arm receives ``compensate(command[i])`` instead of the command.
    """
    return simulate_closed_loop(command, rate_hz, profile, start, compensator)[0]


def simulate_closed_loop(command: np.ndarray, rate_hz: float, profile: ArmProfile, start: np.ndarray | None = None,
                         compensator: Compensator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(measured positions, commands the arm received), both N×J; see :func:`simulate_real`."""
    dt = 1.0 / rate_hz
    alpha = 1.0 - math.exp(-dt / profile.lag_s) if profile.lag_s > 0 else 1.0
    half = profile.backlash_rad / 2
    motor = np.array(command[0] if start is None else start, dtype=np.float64)
    link = motor.copy()
    out = np.empty_like(command)
    received = np.empty_like(command)
    in_flight = [motor.copy() for _ in range(profile.delay_steps)]  # commands sent, not yet acting
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
        received[i] = applied
        if in_flight:
            in_flight.append(np.array(applied))
            applied = in_flight.pop(0)
        motor += alpha * (applied - motor)
        link = np.clip(link, motor - half, motor + half)
    return out, received


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


@dataclass(frozen=True)
class ClosedLoopCheck:
    """Closed-loop acceptance figures of a model on the synthetic arm (per joint, rad)."""

    step_variation: np.ndarray  # peak-to-peak of the sent command over the last second of a held step target
    sine_variation: np.ndarray  # the same after a slow sine came to rest on a held target
    sine_rms_plain: np.ndarray  # RMS distance from the ideal sim during the sine, uncompensated
    sine_rms_compensated: np.ndarray  # the same, compensated
    settle_bound: float  # largest variation accepted as settled
    rms_slack: float  # compensated RMS may exceed uncompensated by at most this (numerical slack)

    @property
    def settled(self) -> bool:
        return bool(np.all(self.step_variation <= self.settle_bound) and np.all(self.sine_variation <= self.settle_bound))

    @property
    def tracks_no_worse(self) -> bool:
        return bool(np.all(self.sine_rms_compensated <= self.sine_rms_plain + self.rms_slack))

    @property
    def passed(self) -> bool:
        return self.settled and self.tracks_no_worse

    def describe(self) -> str:
        def r(a: np.ndarray) -> list[float]:
            return np.round(a, 4).tolist()

        return (f"settled output variation (≤ {self.settle_bound}): step {r(self.step_variation)}, after sine "
                f"{r(self.sine_variation)}; slow-sine RMS from the ideal sim: uncompensated {r(self.sine_rms_plain)}, "
                f"compensated {r(self.sine_rms_compensated)}")


def closed_loop_check(model: GapModel, profile: str = "default", rate_hz: float = 50.0,
                      settle_bound: float = 1e-3, rms_slack: float = 1e-3) -> ClosedLoopCheck:
    """Drive the synthetic arm through the compensator on a held step target and on a slow sine that stops.

    A compensator that rings (a high-gain loop through its own history) shows as output variation on
    the held targets; one that makes tracking worse shows in the sine's RMS against the ideal sim.
    """
    arm = PROFILES[profile]
    centre = np.array([(j.lower + j.upper) / 2 for j in JOINTS])
    reach = np.array([0.15 * j.span for j in JOINTS])
    second = int(round(rate_hz))

    def compensator() -> Compensator:
        return Compensator(CompensatorConfig(joints=JOINT_NAMES), model)

    step = np.tile(centre + reach, (4 * second, 1))
    _, sent = simulate_closed_loop(step, rate_hz, arm, start=centre, compensator=compensator())
    step_variation = np.ptp(sent[-second:], axis=0)

    t = np.arange(10 * second) / rate_hz
    sine = centre + reach * np.sin(2 * np.pi * 0.2 * t)[:, None]  # 0.2 Hz, ends back at the centre
    held = np.vstack([sine, np.tile(sine[-1], (3 * second, 1))])
    ideal = np.vstack([held[:1], held[:-1]])
    plain = simulate_real(held, rate_hz, arm)
    measured, sent = simulate_closed_loop(held, rate_hz, arm, compensator=compensator())
    moving = slice(second, len(sine))

    def rms(real: np.ndarray) -> np.ndarray:
        return np.sqrt(np.mean((real[moving] - ideal[moving]) ** 2, axis=0))

    return ClosedLoopCheck(step_variation, np.ptp(sent[-second:], axis=0), rms(plain), rms(measured),
                           settle_bound, rms_slack)


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
        written.append(PairedEpisode(
            name=f"synthetic_{profile}_{index:03d}", time=time, command=command,
            real_position=real, real_velocity=causal_velocity(real, time), real_effort=nan,
            sim_position=sim, sim_velocity=causal_velocity(sim, time), sim_effort=nan,
        ))
    extra = {"source": "so101_gaponet.synthetic", "profile": profile, "seed": seed,
             "real_arm": {"lag_s": arm.lag_s, "backlash_rad": arm.backlash_rad, "sag_rad": arm.sag_rad}}
    return PairedDataset(rate_hz=rate_hz, episodes=written, metadata=extra).save(path)
