"""Per-arm refinement of the population compensator that knows when it has enough excitation.

The population model (:mod:`so101_gaponet.train_population`) already adapts to the arm it drives; a few
episodes of that arm's own excitation specialise it further. How many is measured, not fixed: episodes
arrive one at a time (:meth:`Refinement.add`), and each new episode — data no model has seen — judges the
models trained before it. The model trained on ``k − 1`` episodes is compared with the one trained on
``k − 2`` (the population model for ``k = 2``) on episode ``k``: when the episode before brought less than
``tolerance`` of improvement in that validation loss, more of the same excitation is not worth its time and
collection stops; it stops in any case at ``max_episodes``. The model returned is fine-tuned from the
population model on every episode collected.

Used by ``so101 train-compensator --profile ARM`` (simulated time) and ``so101 demo`` (through ROS).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from so101_common.paired_dataset import PairedDataset

if TYPE_CHECKING:  # torch is imported when a refinement starts, not by the command lines that only parse settings
    from so101_gaponet.train_population import PopulationResult

__all__ = ["RefineSettings", "RefineStep", "Refinement"]


@dataclass(frozen=True)
class RefineSettings:
    """When refinement has enough, and how each refined model is trained."""

    min_episodes: int = 2  # the first comparison needs two episodes
    max_episodes: int = 5  # the cap
    tolerance: float = 0.05  # an episode that lowers the next one's validation loss by less than this share: enough
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
    """What one episode told (losses: normalised MSE of Δ on that episode)."""

    episodes: int  # collected so far
    loss: float  # of the newest model before this episode (trained on episodes − 1 of them)
    previous_loss: float | None  # of the model before that one, on the same episode
    stop: str  # '' while collection goes on; otherwise why it stopped

    @property
    def improvement(self) -> float | None:
        """Share by which the newest model beat the one before on this episode."""
        if self.previous_loss is None or not self.previous_loss > 0:
            return None
        return 1.0 - self.loss / self.previous_loss

    def line(self, name: str) -> str:
        """One progress line."""
        model = "the population model" if self.episodes == 1 else f"the model refined on {self.episodes - 1}"
        text = f"   refinement: {name} (episode {self.episodes}): validation loss {self.loss:.4f} with {model}"
        if self.improvement is not None:
            text += f" ({self.improvement:+.0%} against the model before)"
        return text + (f"; {self.stop}" if self.stop else "; collecting more")


class Refinement:
    """Episodes of one arm in, a refined compensator out (see the module doc)."""

    def __init__(self, start: PopulationResult, settings: RefineSettings = RefineSettings()) -> None:
        from so101_gaponet.train_population import PopulationConfig

        self.settings = settings
        meta = start.metadata
        self.config = PopulationConfig(
            context_rows=meta.history, warmup_rows=meta.warmup_rows or meta.history, horizon=meta.future_steps,
            epochs=settings.epochs, learning_rate=settings.learning_rate, seed=settings.seed,
            feedback_gain=(meta.feedback_gain or (0.0,))[0], direction_play=meta.direction_play, progress=False)
        self._start = start
        self._models = [start]
        self._episodes: list[PairedDataset] = []
        self.steps: list[RefineStep] = []

    @classmethod
    def from_file(cls, path: str | Path, settings: RefineSettings = RefineSettings()) -> Refinement:
        """Start from a population model file (``context_mlp``)."""
        from so101_gaponet.context import ContextCompensator
        from so101_gaponet.train_population import PopulationResult

        module, metadata = ContextCompensator.from_onnx(path)
        return cls(PopulationResult(module, metadata), settings)

    @property
    def done(self) -> bool:
        return bool(self.steps) and bool(self.steps[-1].stop)

    @property
    def model(self) -> PopulationResult:
        """The newest model (the population model before the first episode)."""
        return self._models[-1]

    def add(self, episode: PairedDataset) -> RefineStep:
        """Judge the models so far on ``episode``, keep it, train the next model; the step says whether to go on."""
        from so101_gaponet.train_population import population_samples, validation_loss

        if self.done:
            raise RuntimeError("refinement already stopped: " + self.steps[-1].stop)
        data = population_samples([episode], self.config.context_rows, self.config.horizon)
        newest = self._models[-1]
        loss = validation_loss(newest.module, newest.metadata.normalisation, data, self.config, self.settings.seed)
        previous = None
        if len(self._models) >= 2:
            before = self._models[-2]
            previous = validation_loss(before.module, before.metadata.normalisation, data, self.config, self.settings.seed)
        self._episodes.append(episode)
        count = len(self._episodes)
        stop = ""
        step = RefineStep(count, loss, previous, "")
        if count >= self.settings.max_episodes:
            stop = f"the cap of {self.settings.max_episodes} episodes"
        elif count >= self.settings.min_episodes and step.improvement is not None \
                and step.improvement < self.settings.tolerance:
            stop = (f"enough: the last episode improved validation by {step.improvement:.0%}, under "
                    f"{self.settings.tolerance:.0%}")
        self._models.append(self._train())
        step = replace(step, stop=stop)
        self.steps.append(step)
        return step

    def _train(self) -> PopulationResult:
        from so101_gaponet.train_population import PopulationResult, train_population

        start = PopulationResult(copy.deepcopy(self._start.module), self._start.metadata)
        provenance: dict[str, Any] = {
            "refined_from": str(self._start.metadata.provenance.get("git_rev", "")),
            "refined_on": [e.metadata.get("profile", "") for e in self._episodes],
            "refinement_episodes": len(self._episodes)}
        result = train_population(self._episodes, self.config, initial=start, provenance=provenance)
        if not math.isfinite(result.validation_losses[-1]):
            raise RuntimeError("refinement diverged (non-finite validation loss)")
        return result
