"""Training that knows when it has enough excitation of one arm.

How many excitation episodes an arm needs is measured, not fixed: episodes arrive one at a time
(:meth:`Refinement.add`) and each new episode — data no model has seen — judges the models trained before it.
The model trained on ``k − 1`` episodes is compared with the one trained on ``k − 2`` on episode ``k``: when
the episode before changed that validation loss by less than ``tolerance`` either way, more of the same excitation
is not worth its time and collection stops; it stops in any case at ``max_episodes``. An episode that made the
model worse by more than that is no sign of enough: the models are not settled yet (a model fine-tuned on one
episode from a start model overfits it), and collection goes on. The model
returned is trained on every episode collected.

What is trained is an :class:`EpisodeTrainer`: :class:`ArmTrainer` (the arm's own compensator, ``joint_mlp``,
from scratch, what ``so101 demo`` trains through ROS, or from a per-arm model such as the shipped one, which
then judges the first episode) or :class:`PopulationTrainer` (a population model
fine-tuned on the arm: ``so101 train-compensator --refine``; it also judges the first episode, so the first
comparison comes one episode earlier).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from so101_common.paired_dataset import PairedDataset

if TYPE_CHECKING:  # torch is imported when training starts, not by the command lines that only parse settings
    from so101_gaponet.train import TrainConfig, TrainResult
    from so101_gaponet.train_population import PopulationResult

__all__ = ["RefineSettings", "RefineStep", "EpisodeTrainer", "ArmTrainer", "PopulationTrainer", "Refinement",
           "trainer_from_file"]


@dataclass(frozen=True)
class RefineSettings:
    """When collection has enough, and how each model is trained."""

    min_episodes: int = 2  # no stop before this many episodes
    max_episodes: int = 5  # the cap
    tolerance: float = 0.05  # an episode that changes the next one's validation loss by less than this share: enough
    epochs: int = 30  # measured on validation arms: 15 epochs at 1e-3 left stiff arms' lift 7 points lower
    learning_rate: float = 3e-3
    seed: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.min_episodes <= self.max_episodes:
            raise ValueError("refinement needs 2 ≤ min_episodes ≤ max_episodes")
        if not 0 <= self.tolerance < 1 or self.epochs < 1 or not self.learning_rate > 0:
            raise ValueError("tolerance in [0, 1), epochs ≥ 1 and learning_rate > 0 required")


@dataclass(frozen=True)
class RefineStep:
    """What one episode told."""

    episodes: int  # collected so far
    loss: float | None  # of the newest model before this episode (None: no model yet)
    previous_loss: float | None  # of the model before that one, on the same episode
    stop: str  # '' while collection goes on; otherwise why it stopped
    start_label: str = "the start model"  # what the model before any episode is

    @property
    def improvement(self) -> float | None:
        """Share by which the newest model beat the one before on this episode."""
        if self.loss is None or self.previous_loss is None or not self.previous_loss > 0:
            return None
        return 1.0 - self.loss / self.previous_loss

    def line(self, name: str) -> str:
        """One progress line."""
        text = f"   refinement: {name} (episode {self.episodes}): "
        if self.loss is None:
            text += "no model to judge it with yet"
        else:
            text += f"validation loss {self.loss:.4g} with {self._model_label(self.episodes - 1)}"
        improvement = self.improvement
        if improvement is not None:  # said as lower or higher: a signed share of a loss reads either way
            text += (f" ({abs(improvement):.0%} {'lower' if improvement >= 0 else 'higher'} than with "
                     f"{self._model_label(self.episodes - 2)})")
        return text + (f"; {self.stop}" if self.stop else "; collecting more")

    def _model_label(self, episodes: int) -> str:
        return self.start_label if episodes == 0 else f"the model trained on {episodes}"


class EpisodeTrainer(Protocol):
    """What a :class:`Refinement` trains and how it judges a model on an episode it has not seen."""

    @property
    def start(self) -> Any | None:
        """The model before any episode (None: the first episode cannot be judged)."""

    @property
    def start_label(self) -> str:
        """What that model is, for the progress lines."""

    def train(self, episodes: Sequence[PairedDataset]) -> Any: ...

    def loss(self, model: Any, episode: PairedDataset) -> float: ...


class ArmTrainer:
    """The arm's own compensator (:func:`so101_gaponet.train.train`'s objective), trained on the episodes so far from
    scratch or, given ``start`` (a per-arm model, :func:`so101_gaponet.train.load_start`), from that model, which
    then also judges the first episode; its loss is the mean squared error of Δ in rad² (models trained from
    scratch on different episodes have different normalisations, so the loss is in physical units)."""

    def __init__(self, config: TrainConfig, start: TrainResult | None = None, start_label: str = "the start model") -> None:
        from so101_gaponet.train import continued_config

        self.config = config if start is None else continued_config(config, start.metadata)
        self.start = start
        self.start_label = start_label if start is not None else "no model"

    def train(self, episodes: Sequence[PairedDataset]) -> TrainResult:
        from so101_gaponet.train import samples_of, train_samples

        names = [episode.name for dataset in episodes for episode in dataset.episodes]
        result = train_samples(samples_of(episodes, names, self.config), self.config, self.start)
        if not math.isfinite(result.validation_losses[-1]):
            raise RuntimeError("training diverged (non-finite validation loss)")
        return result

    def loss(self, model: TrainResult, episode: PairedDataset) -> float:
        import torch

        from so101_gaponet.train import build_samples, normalised_tensors

        history, commands, delta = build_samples(episode, self.config.history, self.config.horizon)
        norm = model.metadata.normalisation
        tensors = normalised_tensors(norm, history, commands, delta)
        model.module.eval()
        with torch.no_grad():
            predicted = model.module(tensors[0], tensors[1]).numpy()
        raw = predicted * np.asarray(norm.delta_std) + np.asarray(norm.delta_mean)
        return float(np.mean((raw - delta) ** 2))


class PopulationTrainer:
    """A population model (``context_mlp``) fine-tuned on the episodes so far, keeping its normalisation (its
    loss is the normalised MSE of Δ, comparable between its refinements)."""

    start_label = "the population model"

    def __init__(self, start: PopulationResult, settings: RefineSettings = RefineSettings()) -> None:
        from so101_gaponet.train_population import PopulationConfig

        meta = start.metadata
        self.start = start
        self.seed = settings.seed
        self.config = PopulationConfig(
            context_rows=meta.history, warmup_rows=meta.warmup_rows or meta.history, horizon=meta.future_steps,
            epochs=settings.epochs, learning_rate=settings.learning_rate, seed=settings.seed,
            feedback_gain=(meta.feedback_gain or (0.0,))[0], direction_play=meta.direction_play, progress=False)

    @classmethod
    def from_file(cls, path: str | Path, settings: RefineSettings = RefineSettings()) -> PopulationTrainer:
        """Start from a population model file (``context_mlp``)."""
        from so101_gaponet.context import ContextCompensator
        from so101_gaponet.train_population import PopulationResult

        module, metadata = ContextCompensator.from_onnx(path)
        return cls(PopulationResult(module, metadata), settings)

    def train(self, episodes: Sequence[PairedDataset]) -> PopulationResult:
        from so101_gaponet.train_population import PopulationResult, train_population

        start = PopulationResult(copy.deepcopy(self.start.module), self.start.metadata)
        provenance: dict[str, Any] = {
            "refined_from": str(self.start.metadata.provenance.get("git_rev", "")),
            "refined_on": [e.metadata.get("profile", "") for e in episodes], "refinement_episodes": len(episodes)}
        result = train_population(episodes, self.config, initial=start, provenance=provenance)
        if not math.isfinite(result.validation_losses[-1]):
            raise RuntimeError("refinement diverged (non-finite validation loss)")
        return result

    def loss(self, model: PopulationResult, episode: PairedDataset) -> float:
        from so101_gaponet.train_population import population_samples, validation_loss

        data = population_samples([episode], self.config.context_rows, self.config.horizon)
        return validation_loss(model.module, model.metadata.normalisation, data, self.config, self.seed)


def trainer_from_file(path: str | Path, settings: RefineSettings = RefineSettings()) -> EpisodeTrainer:
    """The trainer that refines the model file ``path``: a population model (``context_mlp``) fine-tuned, or a
    per-arm compensator (such as the shipped ``default`` one) that the arm's own model starts from."""
    from so101_gaponet.model_file import read_metadata
    from so101_gaponet.train import TrainConfig, load_start

    if read_metadata(path).model_kind == "context_mlp":
        return PopulationTrainer.from_file(path, settings)
    config = TrainConfig(epochs=settings.epochs, learning_rate=settings.learning_rate, seed=settings.seed, progress=False)
    return ArmTrainer(config, load_start(path), f"the start model ({Path(path).name})")


class Refinement:
    """Episodes of one arm in, a compensator trained on as many as it needs out (see the module doc)."""

    def __init__(self, trainer: EpisodeTrainer, settings: RefineSettings = RefineSettings()) -> None:
        self.trainer, self.settings = trainer, settings
        self._models: list[Any] = [] if trainer.start is None else [trainer.start]
        self._episodes: list[PairedDataset] = []
        self.steps: list[RefineStep] = []

    @property
    def done(self) -> bool:
        return bool(self.steps) and bool(self.steps[-1].stop)

    @property
    def model(self) -> Any:
        """The newest model (the start model, or None, before the first episode)."""
        return self._models[-1] if self._models else None

    def add(self, episode: PairedDataset, halt: str = "") -> RefineStep:
        """Judge the models so far on ``episode``, keep it, train the next model; the step says whether to go on.
        ``halt``: a reason from outside to stop after this episode (the arm cannot take more), which stops it
        even below ``min_episodes`` when the rule itself would go on."""
        if self.done:
            raise RuntimeError("refinement already stopped: " + self.steps[-1].stop)
        loss = self.trainer.loss(self._models[-1], episode) if self._models else None
        previous = self.trainer.loss(self._models[-2], episode) if len(self._models) >= 2 else None
        self._episodes.append(episode)
        count = len(self._episodes)
        step = RefineStep(count, loss, previous, "", self.trainer.start_label)
        stop = ""
        improvement, tolerance = step.improvement, self.settings.tolerance
        if count >= self.settings.min_episodes and improvement is not None and abs(improvement) < tolerance:
            stop = (f"enough: the last episode made validation {-improvement:.0%} worse, within {tolerance:.0%}"
                    if improvement < 0 else
                    f"enough: the last episode improved validation by {improvement:.0%}, under {tolerance:.0%}")
        elif count >= self.settings.max_episodes:
            stop = f"the cap of {self.settings.max_episodes} episodes"
        elif halt:
            stop = halt
        self._models.append(self.trainer.train(self._episodes))
        step = replace(step, stop=stop)
        self.steps.append(step)
        return step
