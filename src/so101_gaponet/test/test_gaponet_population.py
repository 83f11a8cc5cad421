"""The population trainer and per-arm refinement on the synthetic arms (known lags): what the branch learns, and
when refinement has enough."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_common.paired_dataset import PairedDataset
from so101_gaponet.refine import PopulationTrainer, Refinement, RefineSettings
from so101_gaponet.synthetic import make_dataset
from so101_gaponet.train_population import PopulationConfig, population_samples, train_population, validation_loss

CONFIG = PopulationConfig(context_rows=20, warmup_rows=5, horizon=6, hidden=16, encoder_hidden=8, latent=2, epochs=8,
                          progress=False)


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[PairedDataset]]:
    """Two synthetic arms that lag differently (default: 100 ms; stiff_delayed: a stiff servo behind dead time),
    one 20 s episode per dataset."""
    folder = tmp_path_factory.mktemp("arms")
    return {profile: [PairedDataset.load(make_dataset(folder / f"{profile}{seed}", profile=profile, episodes=1,
                                                      seconds=20.0, seed=seed)) for seed in range(3)]
            for profile in ("default", "stiff_delayed")}


def test_windows_are_drawn_from_the_same_arm_and_samples_need_a_full_look_ahead(arms) -> None:
    data = population_samples([*arms["default"][:2], *arms["stiff_delayed"][:1]], context_rows=20, horizon=6)
    assert data.arms == ["default", "stiff_delayed"]  # told apart by the datasets' profile
    per_episode = 1000
    assert len(data.samples) == 3 * (per_episode - 6)
    # every window of an arm ends in that arm's episodes, a full window after an episode's start
    default_ends, stiff_ends = data.windows
    assert default_ends.min() == 19 and default_ends.max() < 2 * per_episode
    assert stiff_ends.min() == 2 * per_episode + 19
    assert set(np.unique(data.sample_arm[data.samples >= 2 * per_episode])) == {1}


def test_the_branch_tells_the_arms_apart(arms) -> None:
    """Trained on both arms, the model with the branch predicts each arm's Δ better than the same network
    without it (latent 0), on episodes of either arm it was not trained on."""
    train = [*arms["default"][:2], *arms["stiff_delayed"][:2]]
    held_out = population_samples([arms["default"][2], arms["stiff_delayed"][2]], CONFIG.context_rows, CONFIG.horizon)
    losses = {}
    for latent in (0, 2):
        config = PopulationConfig(**{**CONFIG.__dict__, "latent": latent, "epochs": 40})
        result = train_population(train, config)
        losses[latent] = validation_loss(result.module, result.metadata.normalisation, held_out, config)
    assert losses[2] < 0.85 * losses[0], losses  # measured: 0.082 against 0.105


def test_refinement_stops_when_the_next_episode_is_not_predicted_better(arms, tmp_path: Path) -> None:
    start = train_population(arms["default"][:1], CONFIG)  # a "population" model of another arm
    episodes = arms["stiff_delayed"]
    # any improvement under 99 % is not enough: it stops at the first comparison (episode 2), and says so
    settings = RefineSettings(tolerance=0.99, max_episodes=3, epochs=5)
    strict = Refinement(PopulationTrainer(start, settings), settings)  # the cap comes after
    first = strict.add(episodes[0])
    assert first.stop == "" and first.previous_loss is None and not strict.done
    second = strict.add(episodes[1])
    assert second.loss is not None and second.previous_loss is not None
    assert second.loss < second.previous_loss  # refined on this arm: better
    assert strict.done and second.stop.startswith("enough: the last episode improved validation by")
    assert "refinement: excitation-1 (episode 2)" in second.line("excitation-1")
    with pytest.raises(RuntimeError, match="already stopped"):
        strict.add(episodes[2])
    # an episode that still helps by at least the tolerance (0 here) goes on, up to the cap
    settings = RefineSettings(tolerance=0.0, max_episodes=3, epochs=5)
    capped = Refinement(PopulationTrainer(start, settings), settings)
    steps = [capped.add(e) for e in episodes]
    assert [s.stop for s in steps[:2]] == ["", ""] and steps[2].stop == "the cap of 3 episodes"
    assert capped.model.metadata.provenance["refinement_episodes"] == 3


def test_an_arm_s_own_model_is_judged_from_the_second_model_on_and_trained_on_every_episode(arms) -> None:
    """From scratch there is no model to judge the first episode with; the second episode judges the model of
    one episode, the third compares the models of two and one episodes (in rad², each with its own
    normalisation): the first point at which collection can stop."""
    from so101_gaponet.refine import ArmTrainer
    from so101_gaponet.train import TrainConfig

    settings = RefineSettings(tolerance=0.99, max_episodes=4)
    refinement = Refinement(ArmTrainer(TrainConfig(epochs=5, progress=False)), settings)
    assert refinement.model is None
    first, second = refinement.add(arms["default"][0]), refinement.add(arms["default"][1])
    assert first.loss is None and "no model to judge it with yet; collecting more" in first.line("excitation-0")
    assert second.loss is not None and second.previous_loss is None and second.stop == ""
    third = refinement.add(arms["default"][2])
    assert third.loss is not None and third.previous_loss is not None
    assert 0.0 < third.loss < 0.01  # rad²: Δ is tens of mrad
    assert refinement.done and third.stop.startswith("enough")
    assert refinement.model is not None
    assert refinement.model.metadata.provenance["datasets"] == [e.name for d in arms["default"] for e in d.episodes]


def test_a_halt_from_outside_stops_collection_after_that_episode_even_below_the_minimum(arms) -> None:
    """The arm cannot take more (its servos' heat): the episode is kept and trained on, and the step says why."""
    from so101_gaponet.refine import ArmTrainer
    from so101_gaponet.train import TrainConfig

    refinement = Refinement(ArmTrainer(TrainConfig(epochs=2, progress=False)), RefineSettings(max_episodes=4))
    step = refinement.add(arms["default"][0], halt="the servos' heat")
    assert refinement.done and step.stop == "the servos' heat" and step.line("excitation-0").endswith("; the servos' heat")
    assert refinement.model is not None
    assert refinement.model.metadata.provenance["datasets"] == [e.name for e in arms["default"][0].episodes]
