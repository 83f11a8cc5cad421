"""Per-arm training that starts from a fitted compensator (the shipped ``default`` model in ``so101 demo``): the
network is rebuilt from the model file, its normalisation is kept, and it needs less of the new arm's data."""

from __future__ import annotations

from pathlib import Path

import pytest

from so101_common.paired_dataset import PairedDataset
from so101_gaponet.export import reproduction_error, write_and_check
from so101_gaponet.metadata import ModelFileError
from so101_gaponet.model_file import load_model, save_onnx
from so101_gaponet.refine import ArmTrainer, Refinement, RefineSettings
from so101_gaponet.synthetic import make_dataset
from so101_gaponet.train import (
    TrainConfig,
    TrainingError,
    TrainResult,
    check_start_fits,
    load_start,
    samples_of,
    train_samples,
)

CONFIG = TrainConfig(hidden=16, epochs=20, progress=False)


def _arm(folder: Path, profile: str, seed: int, seconds: float = 20.0) -> PairedDataset:
    return PairedDataset.load(make_dataset(folder / f"{profile}{seed}", profile=profile, episodes=1, seconds=seconds,
                                           seed=seed))


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, Path]:
    """A compensator of the synthetic ``lag`` arm (a 60 ms first-order lag), written as ONNX."""
    folder = tmp_path_factory.mktemp("start")
    episodes = [_arm(folder, "lag", seed) for seed in range(2)]
    result = train_samples(samples_of(episodes, ["a", "b"], CONFIG), CONFIG)
    path = folder / "start.onnx"
    assert write_and_check(result.module, result.metadata, path, "onnx") < 1e-4
    return result, path


def test_the_network_is_rebuilt_from_the_model_file(start, tmp_path: Path) -> None:
    trained, path = start
    loaded = load_start(path)
    assert loaded.metadata == trained.metadata
    assert reproduction_error(loaded.module, loaded.metadata, load_model(path)) < 1e-5
    # what it cannot start from, each with its reason
    other_role = tmp_path / "sim_delta.onnx"
    save_onnx(trained.module, trained.metadata.model_copy(update={"role": "sim_delta"}), other_role)
    with pytest.raises(ModelFileError, match="a sim_delta model .* not a per-arm compensator"):
        load_start(other_role)
    with pytest.raises(ModelFileError, match="only from an ONNX model file"):
        load_start(tmp_path / "model.pt")


def test_training_from_the_start_model_keeps_its_inputs_and_needs_less_data(start, tmp_path: Path) -> None:
    """On another arm (the synthetic ``default``: a 100 ms lag, backlash and gravity sag), 8 s of data and 3
    epochs: the model that starts from the ``lag`` arm's predicts a held-out episode of that arm better than a new
    network does (measured: 8.9e-4 against 3.3e-3 rad²). The other way round, from ``default`` onto ``lag``, it
    does not (7.8e-4 against 4.9e-4; at 30 epochs and 40 s 5.5e-5 against 3.6e-5): what the start model learned
    that the new arm lacks (backlash, sag) stays in it, hence ``--from-scratch`` (package README)."""
    _, path = start
    config = TrainConfig(hidden=16, epochs=3, progress=False)
    little = samples_of([_arm(tmp_path, "default", 10, seconds=8.0)], ["default"], config)
    held_out = _arm(tmp_path, "default", 11)
    loaded = load_start(path)
    continued = train_samples(little, config, loaded)
    scratch = train_samples(little, config)
    judge = ArmTrainer(config)
    assert judge.loss(continued, held_out) < 0.5 * judge.loss(scratch, held_out)
    assert continued.metadata.normalisation == loaded.metadata.normalisation  # its inputs mean what they meant
    assert continued.metadata.provenance["started_from"]["profile"] == loaded.metadata.provenance["profile"]
    assert load_start(path).metadata == loaded.metadata  # the start model itself is not changed
    with pytest.raises(TrainingError, match="continued_config"):
        train_samples(little, TrainConfig(hidden=16, horizon=4, epochs=1, progress=False), loaded)
    # data at another rate or of other joints: refused, and checkable before any data is collected
    check_start_fits(loaded.metadata, little.joints, 50.0)
    with pytest.raises(TrainingError, match="at 50 Hz, the data .* at 100 Hz"):
        check_start_fits(loaded.metadata, little.joints, 100.0)
    with pytest.raises(TrainingError, match="the start model is for"):
        check_start_fits(loaded.metadata, little.joints[:5], 50.0)


def test_refinement_from_a_start_model_judges_the_first_episode_with_it(start, tmp_path: Path) -> None:
    _, path = start
    settings = RefineSettings(tolerance=0.99, max_episodes=3, epochs=2)
    # the trainer takes the start model's shape (hidden 16) whatever its config says
    refinement = Refinement(ArmTrainer(TrainConfig(epochs=2, progress=False), load_start(path), "the start model (x)"),
                            settings)
    assert refinement.model is not None  # before any episode: the start model
    first = refinement.add(_arm(tmp_path, "default", 20))
    assert first.loss is not None and first.previous_loss is None and first.stop == ""
    assert "validation loss" in first.line("excitation-0") and "with the start model (x)" in first.line("excitation-0")
    second = refinement.add(_arm(tmp_path, "default", 21))  # the model on one episode against the start model
    assert second.loss is not None and second.previous_loss is not None and second.loss < second.previous_loss
    assert refinement.done and second.stop.startswith("enough")
    assert refinement.model.metadata.architecture["hidden"] == 16


class _ScriptedTrainer:
    """A model is the number of episodes it was trained on, and its loss on any episode is scripted."""

    start = None
    start_label = "no model"

    def __init__(self, losses: dict[int, float]) -> None:
        self.losses = losses

    def train(self, episodes) -> int:
        return len(episodes)

    def loss(self, model: int, episode: PairedDataset) -> float:
        return self.losses[model]


def test_refinement_goes_on_while_more_excitation_makes_the_model_worse() -> None:
    """A model made worse by one more episode (20 % on the next) is not settled: collection goes on, and stops once
    an episode changes validation by less than the tolerance (2 % here) or, made worse within it, says so."""
    episode = PairedDataset(rate_hz=50.0)  # (the scripted trainer does not read it)
    refinement = Refinement(_ScriptedTrainer({1: 1.0, 2: 1.2, 3: 1.1, 4: 1.078}))
    steps = [refinement.add(episode) for _ in range(5)]
    assert [step.stop for step in steps[:-1]] == ["", "", "", ""]
    assert steps[2].improvement == pytest.approx(-0.2)
    assert steps[-1].stop == "enough: the last episode improved validation by 2%, under 5%"
    within = Refinement(_ScriptedTrainer({1: 1.0, 2: 1.03}))
    assert [within.add(episode).stop for _ in range(3)][-1] == "enough: the last episode made validation 3% worse, within 5%"


def test_the_progress_line_says_whether_the_newer_model_did_better_or_worse_and_than_which() -> None:
    """The loss share is said as lower or higher than with the model one episode older ("+20 %" read either way)."""
    episode = PairedDataset(rate_hz=50.0)  # (the scripted trainer does not read it)
    refinement = Refinement(_ScriptedTrainer({1: 1.0, 2: 1.2, 3: 0.9}))
    steps = [refinement.add(episode) for _ in range(4)]
    assert steps[2].line("excitation-2").endswith(
        "validation loss 1.2 with the model trained on 2 (20% higher than with the model trained on 1); collecting more")
    assert steps[3].line("excitation-3").endswith(
        "validation loss 0.9 with the model trained on 3 (25% lower than with the model trained on 2); collecting more")
