"""Training a sim-delta model: inverse-dynamics targets, supervised fit, then DAgger in closed loop.

1. Targets (:mod:`.targets`): per training frame ``Δ* = u* − a``, the command offset that makes
   MuJoCo follow the smoothed real trajectory.
2. Supervised fit on the real trajectory (teacher forcing: the history is the real arm's state,
   what the simulated state is under a perfect Δ; the play operators run over the whole recording).
   For the networks (``structure``): first the per-joint linear model in closed form (ridge), then the
   network on what it leaves, its output shrunk by ``residual_scale`` afterwards.
3. DAgger: the model drives MuJoCo through the training motions in closed loop (the same
   :class:`.filter.SimDeltaFilter` the replay uses, on the exported ONNX graph); the states it
   visits are added to the data with the same time-indexed targets ``Δ*``, and the model is refitted
   (warm start, fixed normalisation) on the aggregate. This teaches it to steer back when its own
   errors have moved the sim off the real trajectory.

Every figure reported about a model comes from closed-loop replays (:mod:`.rollout`), not from the loss.
"""

from __future__ import annotations

import dataclasses
import datetime
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from so101_common.joints import JOINT_NAMES
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata
from so101_gaponet.models import ArchConfig, build_model
from so101_gaponet.train import FitResult, fit_network, git_revision, normalisation_of
from so101_sim2real.sim_delta import SIM_DELTA_KINDS
from so101_sim2real.sim_delta.features import (
    command_windows,
    history_rows,
    history_windows,
    play_offsets,
    previous_commands,
)
from so101_sim2real.sim_delta.filter import SimDeltaFilter
from so101_sim2real.sim_delta.folded import fold, foldable
from so101_sim2real.sim_delta.network import (
    GravityTorque,
    LinearResidual,
    PerJointMLP,
    PlayStateModel,
    RelativeCommandInputs,
)
from so101_sim2real.sim_delta.recordings import Recording
from so101_sim2real.sim_delta.rollout import CONTROL_RATE_HZ, replay
from so101_sim2real.sim_delta.targets import gravity_coefficients, inverse_commands, smooth_motion

if TYPE_CHECKING:
    import torch

    from so101_gaponet.runtime import GapModel
    from so101_sim2real.replay.mujoco_backend import MujocoSim

__all__ = ["DEFAULT_EPOCHS", "DEFAULT_HIDDEN", "PLAY_RADII", "SimDeltaConfig", "SimDeltaResult", "Samples", "motion_targets", "teacher_samples", "rollout_samples",
           "train_sim_delta", "metadata_for", "MAX_DELTA_BOUND"]

# Epochs that fit the 10-minute budget on 2 shared cores (the Transformer's step costs ~10× an MLP's).
DEFAULT_EPOCHS = {"deeponet": 20, "transformer": 6, "mlp": 20, "linear": 1}
DEFAULT_HIDDEN = {"deeponet": 128, "transformer": 32, "mlp": 64, "linear": 1}
STRUCTURES = ("joint", "linear_residual", "per_joint_residual")
# Each network on top of the per-joint linear model (ridge), trained on its residual: alone, every network
# leaked other joints' motion into the wrist joints and lost to the linear model on every joint (leave-motions-out
# cross-validation on the training motions; README); the MLP's residual is per joint (no leak at all).
DEFAULT_STRUCTURE = {"mlp": "per_joint_residual", "deeponet": "linear_residual", "transformer": "linear_residual"}
MAX_DELTA_BOUND = 0.5  # rad: Δ must express ~100 ms of lag on fast motions, unlike a compensator's correction
# Play-operator radii (rad) per joint: 1.3 encoder steps to 0.08 rad, log-spaced (chosen by leave-motions-out
# cross-validation on the training motions, see the package README)
PLAY_RADII = (0.002, 0.005, 0.01, 0.02, 0.04, 0.08)


@dataclass(frozen=True)
class SimDeltaConfig:
    """Settings of :func:`train_sim_delta`."""

    arch: str = "mlp"
    history: int = 25  # rows (500 ms at 50 Hz: five times the real arm's ~100 ms lag)
    future_steps: int = 5  # current command + 4 upcoming (80 ms)
    hidden: int | None = None  # hidden width; None: DEFAULT_HIDDEN of the architecture
    epochs: int | None = None  # supervised epochs; None: DEFAULT_EPOCHS of the architecture
    sample_stride: int = 2  # every n-th frame of each motion (neighbouring 20 ms frames are nearly the same sample)
    dagger_iterations: int = 2
    dagger_epochs: int = 10  # epochs per DAgger refit
    batch_size: int = 512
    learning_rate: float = 2e-3
    weight_decay: float = 1e-2
    ridge: float = 1e-2  # linear: ridge penalty (normalised units)
    seed: int = 0
    progress: bool = False  # tqdm bar per fit (epochs)
    state_inputs: bool = False  # False: the network reads the command history only (see the package README)
    play_radii: tuple[float, ...] = PLAY_RADII  # play operators per joint (the recurrent state); () = none
    # "joint": the architecture alone; "linear_residual": a per-joint linear model (ridge) plus the architecture
    # trained on its residual; "per_joint_residual": the linear model plus a per-joint MLP residual (the kind
    # must be "mlp"); None: DEFAULT_STRUCTURE of the architecture
    structure: str | None = None
    # the trained residual is applied at this weight (shrunk toward the linear model): measured, README
    residual_scale: float = 0.5
    # DAgger label at a visited state: Δ*(t) + gain · (real − sim position), an expert that steers back
    # (measured stable in closed loop for gain 0.5; 1.0 rings at ~0.01 rad)
    dagger_gain: float = 0.5

    def __post_init__(self) -> None:
        if min(self.history, self.future_steps, self.batch_size, self.sample_stride) < 1 or (self.hidden or 1) < 1 or self.dagger_iterations < 0:
            raise ValueError("history, future_steps, hidden, batch_size and sample_stride must be ≥ 1, dagger_iterations ≥ 0")
        if self.arch not in SIM_DELTA_KINDS:
            raise ValueError(f"arch must be one of {list(SIM_DELTA_KINDS)}, got {self.arch!r}")
        if self.epochs is not None and self.epochs < 1:
            raise ValueError("epochs must be ≥ 1")
        if any(r <= 0 for r in self.play_radii):
            raise ValueError("play radii must be > 0")
        if self.structure is not None and self.structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {list(STRUCTURES)}, got {self.structure!r}")
        if not 0.0 <= self.residual_scale <= 1.0:
            raise ValueError("residual_scale must be in [0, 1]")
        if self.structure == "per_joint_residual" and self.arch != "mlp":
            raise ValueError("the per-joint residual is an MLP: structure 'per_joint_residual' needs arch 'mlp'")

    @property
    def network_structure(self) -> str:
        if self.arch == "linear":
            return "joint"
        return self.structure if self.structure is not None else DEFAULT_STRUCTURE[self.arch]

    @property
    def width(self) -> int:
        return self.hidden if self.hidden is not None else DEFAULT_HIDDEN.get(self.arch, 128)

    @property
    def dagger_rounds(self) -> int:
        """DAgger iterations that run: without state inputs a rollout visits the recording's own inputs."""
        return self.dagger_iterations if self.state_inputs else 0

    @property
    def state_size(self) -> int:
        """The exported graph's recurrent state: the play offsets per radius and joint, and a started flag."""
        return len(self.play_radii) * len(JOINT_NAMES) + 1 if self.play_radii else 0

    @property
    def fit_epochs(self) -> int:
        return self.epochs if self.epochs is not None else DEFAULT_EPOCHS.get(self.arch, 20)


@dataclass
class Samples:
    """Raw model inputs and targets: ``history (S, H, 3J)``, ``commands (S, K, J)``, ``plays (S, R, J)`` (play offsets, rad), ``delta (S, J)``."""

    history: np.ndarray
    commands: np.ndarray
    plays: np.ndarray
    delta: np.ndarray

    @staticmethod
    def concat(parts: Sequence[Samples]) -> Samples:
        return Samples(*(np.concatenate([getattr(p, k) for p in parts]).astype(np.float32)
                         for k in ("history", "commands", "plays", "delta")))

    def teacher_commands(self) -> np.ndarray:
        """``(S, K + R, J)``: the command rows, then the play offsets (the network's teacher-forced view)."""
        return np.concatenate([self.commands, self.plays], axis=1)

    def __len__(self) -> int:
        return len(self.delta)


@dataclass
class SimDeltaResult:
    fit: FitResult
    metadata: GapModelMetadata
    seconds: float  # wall time of training
    log: list[str] = field(default_factory=list)

    @property
    def module(self) -> torch.nn.Module:
        """What a model file holds: the fitted network, behind the play-state recurrence if it has one."""
        return exported_module(self.fit.module, self.metadata)


def exported_module(module: torch.nn.Module, metadata: GapModelMetadata) -> torch.nn.Module:
    """What a model file holds: the network behind its play-state recurrence, folded where it folds (:mod:`.folded`)."""
    if not metadata.state_size:
        return module
    play = PlayStateModel(cast(RelativeCommandInputs, module))
    return fold(play) if foldable(play) else play


def motion_targets(recording: Recording, sim: MujocoSim) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(position, velocity, Δ*)`` of one recording (``sim``: a MujocoSim for its model).

    The targets come from the smoothed trajectory, which is non-causal (a centred window reads
    frames ahead); the *inputs* must not: a velocity smoothed with the next frames leaks the very
    position Δ* aims at, and a model that learns that shortcut drifts in closed loop. Inputs are
    the measured positions and their backward difference, which is all a replay has at a tick.
    """
    dt = 1.0 / recording.rate_hz
    motion = smooth_motion(recording.position, dt)
    velocity = np.vstack([np.zeros((1, recording.position.shape[1])), np.diff(recording.position, axis=0) / dt])
    return recording.position, velocity, inverse_commands(sim, motion) - recording.command


def _samples(recording: Recording, position: np.ndarray, velocity: np.ndarray, delta: np.ndarray,
             config: SimDeltaConfig) -> Samples:
    rows = history_rows(position, velocity, previous_commands(recording.command))
    keep = slice(None, None, config.sample_stride)
    # the play operators start from the arm's initial position, which a replay starts from too
    plays = play_offsets(recording.command, recording.position[0], np.asarray(config.play_radii))
    return Samples(history_windows(rows, config.history)[keep], command_windows(recording.command, config.future_steps)[keep],
                   plays[keep], delta[keep])


def teacher_samples(recording: Recording, targets: tuple[np.ndarray, np.ndarray, np.ndarray], config: SimDeltaConfig) -> Samples:
    """Samples on the real trajectory (the state the sim has under a perfect Δ)."""
    position, velocity, delta = targets
    return _samples(recording, position, velocity, delta, config)


def rollout_samples(recording: Recording, delta_fn: Callable[[np.ndarray, np.ndarray], np.ndarray], metadata: GapModelMetadata,
                    targets: tuple[np.ndarray, np.ndarray, np.ndarray], config: SimDeltaConfig,
                    reset_state: Callable[[], None] | None = None) -> Samples:
    """DAgger samples: the states the model's own closed-loop replay visits, labelled with the time-indexed Δ*."""
    run = replay(recording, SimDeltaFilter(delta_fn, metadata, recording.time, recording.command, reset_state))
    label = targets[2] + config.dagger_gain * (targets[0] - run.position)
    return _samples(recording, run.position, run.velocity, label, config)


def _bounds(delta: np.ndarray) -> tuple[float, ...]:
    return tuple(float(b) for b in np.clip(1.5 * np.percentile(np.abs(delta), 99.9, axis=0), 0.01, MAX_DELTA_BOUND))


def metadata_for(fit: FitResult, arch: ArchConfig, config: SimDeltaConfig, bounds: tuple[float, ...],
                 provenance: dict[str, object]) -> GapModelMetadata:
    return GapModelMetadata(
        role="sim_delta", model_kind=arch.kind, joints=JOINT_NAMES, history=config.history,
        future_steps=config.future_steps, rate_hz=CONTROL_RATE_HZ, horizon=1, history_features=HISTORY_FEATURES,
        normalisation=fit.normalisation, delta_bounds=bounds, delta_slew_limit=None, delta_smoothing_s=0.0,
        state_size=config.state_size, provenance=dict(provenance),
        architecture=arch.record() | {"play_radii": list(config.play_radii)})


def _onnx_model(fit: FitResult, metadata: GapModelMetadata, folder: Path) -> GapModel:
    """The fitted network through its ONNX export (what the replay will run)."""
    from so101_gaponet.model_file import load_model, save_onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = save_onnx(exported_module(fit.module, metadata), metadata, folder / "dagger.onnx")
    return load_model(path, role="sim_delta")


def train_sim_delta(recordings: Sequence[Recording], config: SimDeltaConfig,
                    progress: Callable[[str], None] = lambda _message: None) -> SimDeltaResult:
    """Fit a sim-delta model on ``recordings`` (all of them are training data: hold out before calling)."""
    import torch

    from so101_sim2real.replay.mujoco_backend import MujocoSim, MujocoSimConfig

    start = time.monotonic()
    torch.manual_seed(config.seed)
    sim = MujocoSim(MujocoSimConfig(control_rate_hz=CONTROL_RATE_HZ))
    targets = [motion_targets(r, sim) for r in recordings]
    data = Samples.concat([teacher_samples(r, t, config) for r, t in zip(recordings, targets, strict=True)])
    # the inner network reads the play offsets as R more command rows (network.RelativeCommandInputs)
    arch = ArchConfig(kind=config.arch, joints=len(JOINT_NAMES), history=config.history, features=len(HISTORY_FEATURES),
                      future_steps=config.future_steps + len(config.play_radii), hidden=config.width)
    bounds = _bounds(data.delta)
    log = [f"{len(recordings)} motions, {len(data)} teacher-forced samples"]
    progress(log[-1])
    normalisation = normalisation_of(data.history, data.commands, data.delta)
    joints = len(JOINT_NAMES)
    relative = np.concatenate([(data.history[:, :, 2 * joints:] - data.commands[:, :1, :]).reshape(-1, joints),
                               (data.commands[:, 1:, :] - data.commands[:, :1, :]).reshape(-1, joints)])
    scale = np.maximum(relative.std(axis=0), 1e-3)  # rad: the spread of command changes over the window
    # the gravity joints' row 0: MuJoCo's gravity torque at the commanded pose (network.GravityTorque), standardised
    gravity = GravityTorque(gravity_coefficients(sim))
    with torch.no_grad():
        torque = gravity(torch.from_numpy(data.commands[:, :1, :].astype(np.float32)))[:, 0].numpy()
    torque_mean, torque_std = torque.mean(axis=0), np.maximum(torque.std(axis=0), 1e-3)

    def network(inner: torch.nn.Module | None = None) -> torch.nn.Module:
        return RelativeCommandInputs(build_model(arch) if inner is None else inner, normalisation, scale, config.state_inputs,
                                     config.future_steps, gravity, torque_mean, torque_std, config.play_radii)

    initial = network()
    if config.network_structure != "joint":
        linear_arch = dataclasses.replace(arch, kind="linear")
        linear = fit_network(linear_arch, data.history, data.teacher_commands(), data.delta, epochs=1, ridge=config.ridge,
                             normalisation=normalisation, module=network(build_model(linear_arch)), seed=config.seed)
        log.append(f"per-joint linear fit: validation loss {linear.validation_losses[-1]:.4f}")
        progress(log[-1])
        residual = PerJointMLP(arch) if config.network_structure == "per_joint_residual" else build_model(arch)
        initial = network(LinearResidual(cast(Any, linear.module).net, residual))
    fit = fit_network(arch, data.history, data.teacher_commands(), data.delta, epochs=config.fit_epochs, batch_size=config.batch_size,
                      learning_rate=config.learning_rate, weight_decay=config.weight_decay, seed=config.seed,
                      ridge=config.ridge, normalisation=normalisation, module=initial, progress=config.progress)
    log.append(f"supervised fit: validation loss {fit.initial_validation_loss:.4f} -> {fit.validation_losses[-1]:.4f}")
    progress(log[-1])
    inner = cast(Any, fit.module).net
    if isinstance(inner, LinearResidual):
        inner.residual_scale.fill_(config.residual_scale)
        log.append(f"residual applied at {config.residual_scale}")
    with tempfile.TemporaryDirectory() as tmp:
        for iteration in range(config.dagger_rounds):
            current = metadata_for(fit, arch, config, bounds, {})
            model = _onnx_model(fit, current, Path(tmp))
            visited = [rollout_samples(r, model.delta, current, t, config, model.reset_state)
                       for r, t in zip(recordings, targets, strict=True)]
            data = Samples.concat([data, *visited])
            fit = fit_network(arch, data.history, data.teacher_commands(), data.delta, epochs=config.dagger_epochs,
                              batch_size=config.batch_size, learning_rate=config.learning_rate / 2,
                              weight_decay=config.weight_decay, seed=config.seed + iteration + 1, ridge=config.ridge,
                              progress=config.progress,
                              normalisation=fit.normalisation,
                              module=network() if config.arch == "linear" else fit.module)
            log.append(f"DAgger {iteration + 1}: {len(data)} samples, validation loss {fit.validation_losses[-1]:.4f}")
            progress(log[-1])
    seconds = time.monotonic() - start
    provenance = {
        "motions": [r.name for r in recordings], "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_rev": git_revision(), "samples": len(data), "seed": config.seed, "train_seconds": round(seconds, 1),
        "objective": "delta* = u* - a, u* from mj_inverse on the smoothed real trajectory"
                     + (f"; {config.dagger_rounds} DAgger rounds on closed-loop MuJoCo replays" if config.dagger_rounds else ""),
        "relative_command_scale_rad": [round(float(v), 5) for v in scale], "state_inputs": config.state_inputs,
        "epochs": config.fit_epochs, "sample_stride": config.sample_stride, "dagger_iterations": config.dagger_rounds,
        "dagger_epochs": config.dagger_epochs, "play_radii": list(config.play_radii), "structure": config.network_structure,
        "ridge": config.ridge, "residual_scale": config.residual_scale if config.network_structure != "joint" else None,
    }
    return SimDeltaResult(fit, metadata_for(fit, arch, config, bounds, provenance), seconds, log)
