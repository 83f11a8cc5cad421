"""Deployment caps on Δ (issue 19 §2): a model file may narrow the bounds, never widen them; the load probe
runs the model across its normalisation range and what leaves the bounds is counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_common.joints import JOINT_NAMES
from so101_gaponet.bounds import COMPENSATOR_MAX_DELTA, COMPENSATOR_MAX_DELTA_RATE
from so101_gaponet.compensator import Compensator, CompensatorConfig, CompensatorError
from so101_gaponet.metadata import ModelFileError
from so101_gaponet.model_file import load_model

SHIPPED_MODEL = Path(__file__).resolve().parents[3] / "models" / "gaponet_so101_default.onnx"  # the workspace's models/: tests run from the source tree

CONFIG = CompensatorConfig(joints=JOINT_NAMES)


def _steps(comp: Compensator, steps: int, command: np.ndarray) -> list:
    results = []
    for i in range(steps):
        comp.update_measured(command * 0.9, np.zeros(6), stamp=i * 0.02)
        results.append(comp.compensate(command, now=i * 0.02))
    return results


def test_a_model_whose_bounds_exceed_the_deployment_cap_is_refused_in_one_line(adversarial_onnx) -> None:
    path = adversarial_onnx(1e30)  # the file: 0 on the all-zero probe, 1e9 otherwise, bounds 1e30
    model = load_model(path)
    assert model.probe is not None and model.probe.within_bounds  # 1e9 is "within" 1e30: only the cap catches it
    with pytest.raises(ModelFileError) as err:
        Compensator(CONFIG, model)
    message = str(err.value)
    assert message.startswith(f"{path}: delta_bounds: shoulder_pan asks for |Δ| up to 1e+30 rad")
    assert f"max_delta {COMPENSATOR_MAX_DELTA:g} rad" in message and "\n" not in message


def test_a_model_whose_slew_limit_exceeds_the_rate_cap_is_refused(adversarial_onnx) -> None:
    path = adversarial_onnx(0.1, slew=0.2)  # 0.2 rad/step at 50 Hz = 10 rad/s
    with pytest.raises(ModelFileError, match=rf"^{path}: delta_slew_limit: shoulder_pan asks for 0\.2 rad/step "
                                             rf"\(10 rad/s at 50 Hz\), above the deployment's cap max_delta_rate 5 rad/s"):
        Compensator(CONFIG, load_model(path))


def test_a_narrower_model_is_clipped_slew_limited_by_the_cap_and_counted(adversarial_onnx) -> None:
    model = load_model(adversarial_onnx(0.1))  # within the cap, no slew limit of its own; asks for 1e9 rad
    assert model.probe is not None and not model.probe.within_bounds
    assert model.probe.out_of_bounds == model.probe.inputs - 1  # all but the all-zero probe
    assert model.probe.largest_ratio == pytest.approx(1e10)
    comp = Compensator(CONFIG, model)
    step_cap = COMPENSATOR_MAX_DELTA_RATE / model.metadata.rate_hz  # 0.1 rad/step: the deployment's rate cap
    assert comp.delta_slew_limit is not None
    np.testing.assert_allclose(comp.delta_slew_limit, step_cap)
    command = np.full(6, 0.3)
    results = _steps(comp, 6, command)
    deltas = np.array([r.delta for r in results if r.compensated])
    assert len(deltas) >= 4 and np.abs(deltas).max() <= 0.1 + 1e-12
    assert np.abs(np.diff(deltas, axis=0, prepend=0.0)).max() <= step_cap + 1e-12
    status = comp.status()
    assert status["model_out_of_bounds_steps"] == len(deltas)
    assert "beyond its bounds on 12 of 13 probe inputs" in status["load_probe"]


def test_overrides_and_caps_are_deployment_values(adversarial_onnx) -> None:
    with pytest.raises(CompensatorError, match=r"^delta_bounds: shoulder_pan 0\.5 rad is above the deployment's cap max_delta 0\.3 rad$"):
        CompensatorConfig(joints=JOINT_NAMES, delta_bounds=(0.5,) * 6)
    model = load_model(adversarial_onnx(0.1))
    with pytest.raises(CompensatorError, match=r"^delta_slew_limit: shoulder_pan 0\.2 rad/step \(10 rad/s at 50 Hz\) is above"):
        Compensator(CompensatorConfig(joints=JOINT_NAMES, delta_slew_limit=(0.2,) * 6), model)
    with pytest.raises(CompensatorError, match="max_delta must be finite and > 0"):
        CompensatorConfig(joints=JOINT_NAMES, max_delta=float("inf"))
    # the deployment may raise its own caps: the same file then loads
    wide = Compensator(CompensatorConfig(joints=JOINT_NAMES, max_delta=2.0, max_delta_rate=20.0),
                       load_model(adversarial_onnx(1.0, slew=0.2)))
    np.testing.assert_allclose(wide.delta_bounds, 1.0)


def test_the_shipped_model_fits_the_shipped_caps() -> None:
    model = load_model(SHIPPED_MODEL)
    assert model.probe is not None and model.probe.within_bounds
    comp = Compensator(CONFIG, model)
    assert model.metadata.delta_slew_limit is not None and comp.delta_slew_limit is not None
    np.testing.assert_allclose(comp.delta_slew_limit, np.array(model.metadata.delta_slew_limit))
