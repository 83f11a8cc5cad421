"""Closed loop on the synthetic arms: the trainer's compensator settles on held targets and tracks better.

Known answer: trained on the synthetic ``default`` arm (a 100 ms lag, backlash, sag), the look-ahead
compensator must settle on held targets and cut the slow-sine error on that arm. ``stiff_delayed`` is an
arm it was not trained on (a stiff servo behind two steps of dead time): there the unsmoothed
feed-forward reacts to its own measurements too fast and rings, and the Δ low-pass
(``delta_smoothing_s`` 0.1 s, a node parameter) is what makes a model usable on such an arm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_gaponet.export import train_and_export
from so101_gaponet.model_file import load_model
from so101_gaponet.runtime import GapModel
from so101_gaponet.synthetic import closed_loop_check, make_dataset


@pytest.fixture(scope="module")
def synthetic_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synthetic")
    dataset = make_dataset(folder / "default", profile="default", episodes=3, seconds=20.0, seed=0)
    train_and_export([dataset], folder / "model.onnx", "onnx", epochs=20, progress=False)
    return folder / "model.onnx"


def _smoothed(path: Path, seconds: float) -> GapModel:
    model = load_model(path)
    model.metadata = model.metadata.model_copy(update={"delta_smoothing_s": seconds})
    return model


def test_trained_compensator_settles_and_cuts_the_error_on_its_arm(synthetic_model: Path) -> None:
    check = closed_loop_check(load_model(synthetic_model), profile="default")
    assert check.passed, check.describe()
    assert np.all(check.sine_rms_compensated < 0.3 * check.sine_rms_plain), check.describe()


def test_on_an_arm_with_more_dead_time_the_low_pass_keeps_it_settled(synthetic_model: Path) -> None:
    assert not closed_loop_check(load_model(synthetic_model), profile="stiff_delayed").settled
    check = closed_loop_check(_smoothed(synthetic_model, 0.1), profile="stiff_delayed")
    assert check.passed, check.describe()


def test_check_catches_a_high_gain_compensator(feedback_model) -> None:
    # The one-step inverse of a 100 ms lag at 50 Hz is a gain of ~4.5 on the position error.
    model = feedback_model(gain=4.5)
    model.metadata = model.metadata.model_copy(update={"delta_bounds": (0.35,) * 6, "delta_slew_limit": None,
                                                       "delta_smoothing_s": 0.0})
    check = closed_loop_check(model, profile="stiff_delayed")
    assert not check.settled and not check.passed
    assert check.sine_variation.max() > 0.05, check.describe()
