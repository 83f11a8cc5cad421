"""Supervised GapONet training from paired datasets: learn the inverse of the real arm's response.

Objective (what the deployed compensator needs): at step ``t`` the policy commands ``c_t`` and, when
it can, the next ones ``c_{t+1} … c_{t+F−1}``; the sim follows those commands one frame behind
(MuJoCo's servo is stiff: ``s_{t+k+1} ≈ c_{t+k}``). The compensator must pick the command ``u_t`` that
makes the *real* arm follow that trajectory. The real side of the data shows which command produced
which trajectory, so we learn that inverse with look-ahead: given the real history up to ``t`` (rows
``[q_i, q̇_i, u_{i−1}]``) and the trajectory the real arm actually followed next, ``q_{t+1} … q_{t+F}``
as the ``F`` command rows, predict the command that was sent; the network outputs ``Δ = u_t − q_{t+1}``.
At deploy time the command rows are the policy's commands ``c_t … c_{t+F−1}`` (the trajectory the sim
will follow) and the compensator sends ``c_t + Δ``.

Why look-ahead: a lagging servo must be sent a command *before* the arm is to be somewhere; knowing the
trajectory ``F`` steps ahead (≈ the arm's lag) turns the inverse into a feed-forward term with a gain
near 1 rather than the high-gain one-step inverse that rang on every arm but its training one. What
the feed-forward cannot see (friction and gravity offsets that depend on how the arm got where it is)
is removed by the compensator core's integral feedback (``feedback_gain``, stored in the model file).
Inputs reach the network relative to the measured position (:mod:`so101_gaponet.inputs`), so it
generalises to poses and motions it was not trained on. Samples inside a servo fault span
(:meth:`~so101_common.paired_dataset.PairedEpisode.fault_mask`) are left out: faults are not gaps.
"""

from __future__ import annotations

import copy
import datetime
import logging
import math
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from tqdm import tqdm

from so101_common.paired_dataset import DatasetError, PairedDataset
from so101_common.trajectory import causal_velocity
from so101_gaponet.inputs import RelativeStateInputs
from so101_gaponet.metadata import HISTORY_FEATURES, GapModelMetadata, ModelFileError, ModelKind, Normalisation
from so101_gaponet.models import NETWORK_KINDS, ArchConfig, PerJointLinear, build_model

__all__ = ["CompensatorSamples", "compensator_samples", "compensator_arch", "compensator_module", "compensator_metadata", "delta_loss", "normalised_tensors", "normalisation_of", "FitResult", "TrainConfig", "TrainResult", "TrainingError", "build_samples", "fit_network", "train", "train_samples", "samples_of", "git_revision", "load_start", "continued_config", "check_start_fits"]

_log = logging.getLogger(__name__)


class TrainingError(ValueError):
    """Training cannot run on the given data or settings."""


@dataclass(frozen=True)
class TrainConfig:
    """Training settings."""

    arch: str = "joint_mlp"  # one of NETWORK_KINDS (joint_mlp: see so101_gaponet.models.JointMLP for why)
    history: int = 4  # rows of history the model reads
    horizon: int = 8  # command rows the model reads: the current command and horizon − 1 upcoming ones
    feedback_gain: float = 0.05  # integral feedback of the core per step (see module doc); 0 = none
    # rad: play of the operator that tells the reference's direction; the core keeps one integral
    # correction per direction (dry friction flips with the motion; Compensator._integrate). 0 = one.
    direction_play: float = 0.001
    # False (default): the network reads the command rows only, a feed-forward; the core's integral feedback
    # is the only path from the measured state (see so101_gaponet.inputs for why)
    measured_inputs: bool = False
    epochs: int = 30  # passes over the training samples
    batch_size: int = 256
    learning_rate: float = 3e-3
    hidden: int = 64  # width of hidden layers
    seed: int = 0  # torch / numpy seed: same data + seed → same model
    validation_fraction: float = 0.1  # share of samples held out for the validation loss
    delta_bound: float | None = None  # |Δ| limit (rad) for every joint; None: from the data (see _bounds)
    delta_slew: float | None = None  # Δ slew limit (rad/step) for every joint; None: a third of each Δ bound
    delta_smoothing_s: float = 0.0  # time constant of the Δ low-pass stored in the model (s); 0 = none
    delta_l2: float = 0.0  # weight of an L2 penalty on Δ (in units of the training Δ's std): Δ → 0 unless needed
    weight_decay: float = 1e-4  # AdamW weight decay on the network's parameters
    progress: bool = True  # tqdm progress bar

    def __post_init__(self) -> None:
        if self.arch not in NETWORK_KINDS:
            raise TrainingError(f"unknown arch {self.arch!r}; expected one of {list(NETWORK_KINDS)}")
        if self.history < 1 or self.horizon < 1 or self.epochs < 1 or self.batch_size < 1:
            raise TrainingError("history, horizon, epochs and batch_size must be ≥ 1")
        if not 0 < self.validation_fraction < 0.5:
            raise TrainingError("validation_fraction must be in (0, 0.5)")
        if self.delta_bound is not None and not self.delta_bound > 0:
            raise TrainingError("delta_bound must be > 0")
        if self.delta_slew is not None and not self.delta_slew > 0:
            raise TrainingError("delta_slew must be > 0")
        if not (self.delta_smoothing_s >= 0 and self.delta_l2 >= 0 and self.weight_decay >= 0):
            raise TrainingError("delta_smoothing_s, delta_l2 and weight_decay must be ≥ 0")
        if not (math.isfinite(self.direction_play) and self.direction_play >= 0):
            raise TrainingError("direction_play must be ≥ 0 (rad)")
        if not 0 <= self.feedback_gain < 0.5:
            raise TrainingError("feedback_gain must be in [0, 0.5) per step")


@dataclass
class TrainResult:
    module: torch.nn.Module
    metadata: GapModelMetadata
    train_losses: list[float] = field(default_factory=list)  # per epoch, normalised MSE
    validation_losses: list[float] = field(default_factory=list)
    initial_validation_loss: float = math.nan  # before the first step


@dataclass
class FitResult:
    """A network fitted to ``(history, commands) → delta`` samples, with the statistics it was normalised by."""

    module: torch.nn.Module
    normalisation: Normalisation
    train_losses: list[float] = field(default_factory=list)
    validation_losses: list[float] = field(default_factory=list)
    initial_validation_loss: float = math.nan


def build_samples(dataset: PairedDataset, history: int, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(history (S, H, 3J), trajectory (S, horizon, J), delta (S, J))`` from every episode.

    For each step ``t``: the history rows up to ``t``, the real trajectory ``q_{t+1} … q_{t+horizon}``
    that followed (the command rows of training) and ``Δ = u_t − q_{t+1}``. Samples with a NaN, or
    whose rows touch a servo fault span, are skipped.
    """
    histories, trajectories, deltas = [], [], []
    for episode in dataset.episodes:
        q = episode.real_position
        estimate = causal_velocity(q, episode.time)  # where the dataset has no measured velocity (NaN)
        qd = np.where(np.isnan(episode.real_velocity), estimate, episode.real_velocity)
        command = episode.command
        previous = np.vstack([q[:1], command[:-1]])  # the command in force when q_i was measured
        rows = np.concatenate([q, qd, previous], axis=1)
        count = len(q) - history - horizon + 1
        if count <= 0:
            continue
        index = np.arange(history - 1, history - 1 + count)
        window = np.lib.stride_tricks.sliding_window_view(rows, history, axis=0)[:count].transpose(0, 2, 1)
        ahead = np.lib.stride_tricks.sliding_window_view(q[history:], horizon, axis=0)[:count].transpose(0, 2, 1)
        delta = command[index] - ahead[:, 0, :]
        faulted = np.lib.stride_tricks.sliding_window_view(episode.fault_mask(), history + horizon)[:count].any(axis=1)
        keep = (np.isfinite(window).all(axis=(1, 2)) & np.isfinite(ahead).all(axis=(1, 2))
                & np.isfinite(delta).all(axis=1) & ~faulted)
        histories.append(window[keep])
        trajectories.append(ahead[keep])
        deltas.append(delta[keep])
    if not histories or sum(len(h) for h in histories) < 10:
        raise TrainingError(f"{dataset.path}: too few samples for history {history} and horizon {horizon}")
    return np.concatenate(histories), np.concatenate(trajectories), np.concatenate(deltas)


def _stats(values: np.ndarray, axis: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    mean = values.mean(axis=axis)
    std = values.std(axis=axis)
    return mean, np.where(std > 1e-6, std, 1.0)  # constant features (an unmoved joint) stay unscaled


# rad: cap of data-derived Δ bounds; a compensator is a correction, not a controller. A look-ahead
# feed-forward leads a moving joint by its lag: 0.1 s at 1.5 rad/s is 0.15 rad.
MAX_DEFAULT_BOUND = 0.3


def _bounds(delta: np.ndarray, fixed: float | None) -> tuple[float, ...]:
    """|Δ| limits: given, or 1.5 × the 99.9th percentile of the training Δ, within [0.005, 0.3] rad."""
    if fixed is not None:
        return (float(fixed),) * delta.shape[1]
    return tuple(float(b) for b in np.clip(1.5 * np.percentile(np.abs(delta), 99.9, axis=0), 0.005, MAX_DEFAULT_BOUND))


def git_revision() -> str:
    """The workspace's git commit, or '' outside a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _load(paths: Sequence[str | Path]) -> list[PairedDataset]:
    if not paths:
        raise TrainingError("no dataset given")
    datasets = [PairedDataset.load(p) for p in paths]
    first = datasets[0]
    for other in datasets[1:]:
        if other.joint_names != first.joint_names or not math.isclose(other.rate_hz, first.rate_hz):
            raise DatasetError(f"{other.path}: joints/rate {other.joint_names}@{other.rate_hz} Hz differ from "
                               f"{first.path}: {first.joint_names}@{first.rate_hz} Hz")
    return datasets


def normalisation_of(history: np.ndarray, commands: np.ndarray, delta: np.ndarray) -> Normalisation:
    """Per-column statistics of raw samples (commands share one mean/std per joint over their rows)."""
    h_mean, h_std = _stats(history, (0, 1))
    c_mean, c_std = _stats(commands, (0, 1))
    d_mean, d_std = _stats(delta, (0,))
    return Normalisation(history_mean=tuple(map(float, h_mean)), history_std=tuple(map(float, h_std)),
                         command_mean=tuple(map(float, c_mean)), command_std=tuple(map(float, c_std)),
                         delta_mean=tuple(map(float, d_mean)), delta_std=tuple(map(float, d_std)))


def normalised_tensors(norm: Normalisation, history: np.ndarray, commands: np.ndarray,
                       delta: np.ndarray) -> list[torch.Tensor]:
    """``[history, commands, delta]`` as float32 tensors in the model's normalised units."""
    return [torch.from_numpy(((a - np.asarray(m)) / np.asarray(sd)).astype(np.float32)) for a, m, sd in (
        (history, norm.history_mean, norm.history_std), (commands, norm.command_mean, norm.command_std),
        (delta, norm.delta_mean, norm.delta_std))]


def delta_loss(module: torch.nn.Module, tensors: Sequence[torch.Tensor], index: torch.Tensor, norm: Normalisation,
               delta_l2: float) -> torch.Tensor:
    """The training objective on the samples ``index``: MSE of Δ plus an L2 pull of Δ toward 0 (in Δ's std)."""
    zero_delta = torch.tensor([-m / sd for m, sd in zip(norm.delta_mean, norm.delta_std, strict=True)],
                              dtype=torch.float32)
    predicted = module(tensors[0][index], tensors[1][index])
    return (torch.nn.functional.mse_loss(predicted, tensors[2][index])
            + delta_l2 * torch.mean((predicted - zero_delta) ** 2))


def fit_network(arch: ArchConfig, history: np.ndarray, commands: np.ndarray, delta: np.ndarray, *, epochs: int,
                batch_size: int = 256, learning_rate: float = 3e-3, weight_decay: float = 1e-4, delta_l2: float = 0.0,
                seed: int = 0, validation_fraction: float = 0.1, ridge: float = 1e-3, progress: bool = False,
                normalisation: Normalisation | None = None, module: torch.nn.Module | None = None) -> FitResult:
    """Fit ``arch`` to raw samples ``history (S, H, F·J)``, ``commands (S, K, J)``, ``delta (S, J)``.

    Statistics come from these samples unless ``normalisation`` is given (continued training on
    aggregated data keeps the first statistics so a warm-started ``module`` stays valid). The
    ``linear`` kind is solved in closed form (ridge, per joint); the others by AdamW with a
    cosine schedule and an optional L2 pull of Δ toward 0 (in units of Δ's std).
    """
    # One intra-op thread: these networks are small, and on a loaded 2-core machine two OpenMP threads
    # spin against each other (measured: 4.3 ms vs 112 ms per MLP batch of 512).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(arch, history, commands, delta, epochs=epochs, batch_size=batch_size, learning_rate=learning_rate,
                    weight_decay=weight_decay, delta_l2=delta_l2, seed=seed, validation_fraction=validation_fraction,
                    ridge=ridge, progress=progress, normalisation=normalisation, module=module)
    finally:
        torch.set_num_threads(threads)


def _fit(arch: ArchConfig, history: np.ndarray, commands: np.ndarray, delta: np.ndarray, *, epochs: int, batch_size: int,
         learning_rate: float, weight_decay: float, delta_l2: float, seed: int, validation_fraction: float, ridge: float,
         progress: bool, normalisation: Normalisation | None, module: torch.nn.Module | None) -> FitResult:
    norm = normalisation if normalisation is not None else normalisation_of(history, commands, delta)
    tensors = normalised_tensors(norm, history, commands, delta)
    torch.manual_seed(seed)
    order = np.random.default_rng(seed).permutation(len(history))
    split = max(1, int(len(order) * validation_fraction))
    val_idx, train_idx = torch.from_numpy(order[:split]), torch.from_numpy(order[split:])
    module = module if module is not None else build_model(arch)

    def objective(index: torch.Tensor) -> torch.Tensor:
        return delta_loss(module, tensors, index, norm, delta_l2)

    def evaluate() -> float:
        module.eval()
        with torch.no_grad():
            loss = objective(val_idx).item()
        module.train()
        return loss

    result = FitResult(module, norm, initial_validation_loss=evaluate())
    # a wrapper that transforms the inputs in the graph (sim_delta.network) exposes its inner net
    inner = getattr(module, "net", module)
    if isinstance(inner, PerJointLinear):
        history_in, commands_in = tensors[0][train_idx], tensors[1][train_idx]
        if inner is not module:
            history_in, commands_in = cast(Any, module).transform(history_in, commands_in)
        inner.fit_ridge(history_in, commands_in, tensors[2][train_idx], ridge)
        result.train_losses.append(float(objective(train_idx).item()))
        result.validation_losses.append(evaluate())
        module.eval()
        return result
    optimiser = torch.optim.AdamW(module.parameters(), lr=learning_rate, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=epochs)
    generator = torch.Generator().manual_seed(seed)
    bar = tqdm(range(epochs), desc=f"train {arch.kind}", unit="epoch", disable=not progress)
    for _epoch in bar:
        total = 0.0
        for batch in torch.split(train_idx[torch.randperm(len(train_idx), generator=generator)], batch_size):
            optimiser.zero_grad()
            loss = objective(batch)
            loss.backward()
            optimiser.step()
            total += loss.item() * len(batch)
        scheduler.step()
        result.train_losses.append(total / len(train_idx))
        result.validation_losses.append(evaluate())
        bar.set_postfix(train=f"{result.train_losses[-1]:.4f}", val=f"{result.validation_losses[-1]:.4f}")
    module.eval()
    return result


@dataclass
class CompensatorSamples:
    """The raw training samples of some paired datasets (what every compensator trainer starts from)."""

    history: np.ndarray  # (S, H, 3J) float32
    commands: np.ndarray  # (S, horizon, J) float32: the command rows (in training, the real trajectory that followed)
    delta: np.ndarray  # (S, J) float32, rad
    joints: tuple[str, ...]
    rate_hz: float
    datasets: list[str]  # folder names, for the provenance
    profiles: list[str]  # gap profiles the datasets were recorded on


def compensator_samples(dataset_paths: Sequence[str | Path], config: TrainConfig) -> CompensatorSamples:
    """Load the paired datasets and build the compensator's samples (the same for every trainer)."""
    return samples_of(_load(dataset_paths), [Path(p).name for p in dataset_paths], config)


def samples_of(datasets: Sequence[PairedDataset], names: Sequence[str], config: TrainConfig) -> CompensatorSamples:
    """The compensator's samples of datasets already loaded (``names``: for the provenance)."""
    parts = [build_samples(d, config.history, config.horizon) for d in datasets]
    return CompensatorSamples(
        history=np.concatenate([p[0] for p in parts]).astype(np.float32),
        commands=np.concatenate([p[1] for p in parts]).astype(np.float32),
        delta=np.concatenate([p[2] for p in parts]).astype(np.float32),
        joints=tuple(datasets[0].joint_names), rate_hz=float(datasets[0].rate_hz), datasets=list(names),
        profiles=sorted({str(d.metadata.get("profile", "")) for d in datasets} - {""}))


def compensator_arch(samples: CompensatorSamples, config: TrainConfig) -> ArchConfig:
    """The inner network's shape: the input stage adds one command row (the gravity pose)."""
    return ArchConfig(kind=config.arch, joints=len(samples.joints), history=config.history,
                      features=len(HISTORY_FEATURES), future_steps=config.horizon + 1, hidden=config.hidden)


def compensator_module(samples: CompensatorSamples, config: TrainConfig, normalisation: Normalisation) -> torch.nn.Module:
    """The network to fit: :class:`~so101_gaponet.inputs.RelativeStateInputs` around ``config.arch``."""
    # relative inputs are scaled by the spread of Δ per joint (what the network must produce)
    scale = np.maximum(samples.delta.std(axis=0), 1e-3)
    return RelativeStateInputs(build_model(compensator_arch(samples, config)), normalisation, samples.joints, scale,
                               measured_inputs=config.measured_inputs)


def compensator_metadata(samples: CompensatorSamples, config: TrainConfig, normalisation: Normalisation,
                         losses: dict[str, float], extra: dict[str, Any] | None = None) -> GapModelMetadata:
    """The model file metadata of a compensator trained on ``samples`` (``extra``: more provenance)."""
    bounds = _bounds(samples.delta, config.delta_bound)
    return GapModelMetadata(
        role="compensator", model_kind=cast(ModelKind, config.arch),  # checked in TrainConfig
        joints=samples.joints, history=config.history, future_steps=config.horizon,
        rate_hz=samples.rate_hz, horizon=config.horizon, history_features=HISTORY_FEATURES,
        normalisation=normalisation, delta_bounds=bounds,
        delta_slew_limit=tuple(config.delta_slew if config.delta_slew is not None else b / 3 for b in bounds),
        delta_smoothing_s=config.delta_smoothing_s,
        feedback_gain=(config.feedback_gain,) * len(samples.joints) if config.feedback_gain > 0 else None,
        direction_play=config.direction_play,
        provenance={
            "datasets": samples.datasets, "profile": ",".join(samples.profiles),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "git_rev": git_revision(),
            "samples": len(samples.history), "epochs": config.epochs, "seed": config.seed,
            "objective": "look-ahead inverse of the real response: rows real_position_{t+1..t+horizon}, "
                         "delta = command_t - real_position_{t+1}",
            "delta_l2": config.delta_l2, "weight_decay": config.weight_decay, **losses, **(extra or {}),
        },
        architecture=compensator_arch(samples, config).record(),
    )


def train(dataset_paths: Sequence[str | Path], config: TrainConfig) -> TrainResult:
    """Train a compensator (role ``compensator``, ``horizon`` command rows) on paired datasets."""
    return train_samples(compensator_samples(dataset_paths, config), config)


def load_start(path: str | Path) -> TrainResult:
    """The trainable compensator a per-arm model file was exported from (ONNX, role ``compensator``, one of
    :data:`~so101_gaponet.models.NETWORK_KINDS` behind the relative input stage), for training on another arm
    to start from (:func:`train_samples`' ``start``): the weights are the graph's named initializers, the input
    stage's constants the metadata's normalisation and the graph's ``inverse_scale``. Raises
    :class:`~so101_gaponet.metadata.ModelFileError` when the file is not such a model, or when the network
    rebuilt from it does not reproduce the file's output."""
    from so101_gaponet.export import reproduction_error
    from so101_gaponet.model_file import graph_weights, load_model

    if Path(path).suffix != ".onnx":
        raise ModelFileError(f"{path}: training starts only from an ONNX model file")
    model = load_model(path)
    metadata = model.metadata
    if metadata.role != "compensator" or metadata.model_kind not in NETWORK_KINDS:
        raise ModelFileError(f"{path}: a {metadata.role} model ({metadata.model_kind}), not a per-arm compensator "
                             f"({', '.join(NETWORK_KINDS)})")
    weights = graph_weights(path)
    try:
        module = RelativeStateInputs(build_model(ArchConfig(**metadata.architecture)), metadata.normalisation,
                                     metadata.joints, 1.0 / np.asarray(weights["inverse_scale"], dtype=np.float64))
        module.load_state_dict({name: torch.from_numpy(np.array(weights[name])) for name, _ in module.named_parameters()},
                               strict=False)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ModelFileError(f"{path}: its graph does not hold a per-arm compensator's weights ({err})") from err
    module.eval()
    error = reproduction_error(module, metadata, model)
    if not error <= 1e-4:
        raise ModelFileError(f"{path}: the network rebuilt from its weights does not reproduce the file "
                             f"(off by {error:.2e})")
    return TrainResult(module, metadata)


def continued_config(config: TrainConfig, start: GapModelMetadata) -> TrainConfig:
    """``config`` with the network's shape and the core's settings of the model training starts from."""
    arch = start.architecture
    return replace(config, arch=start.model_kind, history=start.history, horizon=start.future_steps,
                   hidden=int(arch.get("hidden", config.hidden)),
                   feedback_gain=(start.feedback_gain or (0.0,))[0], direction_play=start.direction_play)


def train_samples(samples: CompensatorSamples, config: TrainConfig, start: TrainResult | None = None) -> TrainResult:
    """Train a compensator on samples already built (:func:`compensator_samples`, :func:`samples_of`).

    ``start``: a fitted compensator (:func:`load_start`) to continue from, with its normalisation kept (the
    network's inputs mean what they meant), instead of a new network; ``config`` must give its shape
    (:func:`continued_config`). Measured on 11 held-out arms in simulated time, 4 × 30 s of excitation each, from
    the shipped ``default`` model against from scratch: median cuts on the four SAGE motions 4–6 points higher on
    lift, elbow, wrist flex and wrist roll; through ROS on ``default`` itself it was not better (package README).
    """
    if start is None:
        normalisation = normalisation_of(samples.history, samples.commands, samples.delta)
        torch.manual_seed(config.seed)  # the network's initial weights (the fleet's Ray Train loop seeds alike)
        module = compensator_module(samples, config, normalisation)
    else:
        _check_start(start.metadata, samples, config)
        normalisation, module = start.metadata.normalisation, copy.deepcopy(start.module)
    fitted = fit_network(compensator_arch(samples, config), samples.history, samples.commands, samples.delta,
                         normalisation=normalisation, module=module,
                         epochs=config.epochs, batch_size=config.batch_size,
                         learning_rate=config.learning_rate, weight_decay=config.weight_decay, delta_l2=config.delta_l2,
                         seed=config.seed, validation_fraction=config.validation_fraction, progress=config.progress)
    started: dict[str, Any] = {} if start is None else {"started_from": {
        key: start.metadata.provenance.get(key, "") for key in ("profile", "date", "git_rev")}}
    metadata = compensator_metadata(samples, config, fitted.normalisation, {
        "initial_validation_loss": fitted.initial_validation_loss,
        "final_train_loss": fitted.train_losses[-1], "final_validation_loss": fitted.validation_losses[-1]}, started)
    history = samples.history
    _log.info("trained %s on %d samples: validation loss %.4f → %.4f", config.arch, len(history),
              fitted.initial_validation_loss, fitted.validation_losses[-1])
    return TrainResult(fitted.module, metadata, fitted.train_losses, fitted.validation_losses, fitted.initial_validation_loss)


def check_start_fits(start: GapModelMetadata, joints: Sequence[str], rate_hz: float) -> None:
    """Raise :class:`TrainingError` unless a start model's joints and rate are the data's (check it before
    collecting data for it)."""
    if tuple(start.joints) != tuple(joints) or not math.isclose(start.rate_hz, rate_hz):
        raise TrainingError(f"the start model is for {list(start.joints)} at {start.rate_hz:g} Hz, the data "
                            f"{list(joints)} at {rate_hz:g} Hz")


def _check_start(start: GapModelMetadata, samples: CompensatorSamples, config: TrainConfig) -> None:
    check_start_fits(start, samples.joints, samples.rate_hz)
    wanted = compensator_arch(samples, config).record()
    if {k: start.architecture.get(k) for k in wanted} != wanted:
        raise TrainingError(f"the start model's network {start.architecture} is not the one this training builds "
                            f"{wanted} (continued_config gives the start model's shape)")
