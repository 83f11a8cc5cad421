"""``so101 replay --delta-model``: the replay's cap on |Δ|, the load probe, and a model that returns NaN
(issue 19 §2). The models are built here with onnx.helper: no training, a known answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_common import sage
from so101_common.joints import JOINT_NAMES
from so101_gaponet import model_file
from so101_gaponet.metadata import GapModelMetadata, Normalisation
from so101_testing import run_cli

REPLAY_CLI = "so101_sim2real.cli.replay"
MOTION = Path(__file__).resolve().parents[2] / "so101_common" / "test" / "fixtures" / "sage" / "motion_files" / "so101" / "custom" / "actuator_bandwidth.txt"
JOINTS, COLUMNS = len(JOINT_NAMES), 3 * len(JOINT_NAMES)


def write_onnx(path: Path, role: str, bound: float, answer: str) -> Path:
    """A one-row-history model with identity normalisation and ``delta_bounds`` = ``bound``; ``answer``:

    - ``adversarial`` (issue 19): Δ = 0 on an all-zero input, 1e9 rad on every joint otherwise;
    - ``nan_when_moving``: Δ = sqrt(−Σ|velocity|): 0 on an arm at rest (the load probe), NaN once it moves.
    """
    from onnx import TensorProto, helper

    norm = Normalisation(history_mean=(0.0,) * COLUMNS, history_std=(1.0,) * COLUMNS, command_mean=(0.0,) * JOINTS,
                         command_std=(1.0,) * JOINTS, delta_mean=(0.0,) * JOINTS, delta_std=(1.0,) * JOINTS)
    meta = GapModelMetadata(role=role, model_kind="linear", joints=JOINT_NAMES, history=1, future_steps=1, rate_hz=50.0,
                            horizon=1, normalisation=norm, delta_bounds=(bound,) * JOINTS)
    constants = [helper.make_tensor("axes", TensorProto.INT64, [2], [1, 2]),
                 helper.make_tensor("one", TensorProto.INT64, [1], [1]),
                 helper.make_tensor("start", TensorProto.INT64, [1], [JOINTS]),
                 helper.make_tensor("stop", TensorProto.INT64, [1], [2 * JOINTS]),
                 helper.make_tensor("feature_axis", TensorProto.INT64, [1], [2]),
                 helper.make_tensor("scale", TensorProto.FLOAT, [1, JOINTS], [1e9 if answer == "adversarial" else 1.0] * JOINTS)]
    if answer == "adversarial":
        nodes = [helper.make_node("Abs", ["history"], ["abs_h"]), helper.make_node("Abs", ["commands"], ["abs_c"]),
                 helper.make_node("ReduceSum", ["abs_h", "axes"], ["sum_h"], keepdims=0),
                 helper.make_node("ReduceSum", ["abs_c", "axes"], ["sum_c"], keepdims=0),
                 helper.make_node("Add", ["sum_h", "sum_c"], ["total"]), helper.make_node("Sign", ["total"], ["value"])]
    else:
        nodes = [helper.make_node("Slice", ["history", "start", "stop", "feature_axis"], ["velocity"]),
                 helper.make_node("Abs", ["velocity"], ["speed"]),
                 helper.make_node("ReduceSum", ["speed", "axes"], ["total"], keepdims=0),
                 helper.make_node("Neg", ["total"], ["negative"]), helper.make_node("Sqrt", ["negative"], ["value"])]
    nodes += [helper.make_node("Unsqueeze", ["value", "one"], ["column"]),
              helper.make_node("Mul", ["column", "scale"], ["delta"])]
    graph = helper.make_graph(
        nodes, answer, [helper.make_tensor_value_info("history", TensorProto.FLOAT, ["batch", 1, COLUMNS]),
                        helper.make_tensor_value_info("commands", TensorProto.FLOAT, ["batch", 1, JOINTS])],
        [helper.make_tensor_value_info("delta", TensorProto.FLOAT, ["batch", JOINTS])], initializer=constants)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # onnxruntime reads ≤ 13
    return model_file.write_onnx(proto, meta, path)


@pytest.mark.parametrize(("role", "cap"), [("sim_delta", 0.5), ("compensator", 0.3)])
def test_a_model_asking_for_more_than_the_replay_cap_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], role: str, cap: float) -> None:
    model = write_onnx(tmp_path / "wide.onnx", role, 1e30, "adversarial")
    out = tmp_path / "out"
    assert run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(out), "--delta-model", str(model)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"so101 replay: error: cannot load delta model {model}: delta_bounds: shoulder_pan asks for |Δ| up to "
                   f"1e+30 rad, above the deployment's cap max_delta {cap:g} rad (a model file may narrow a bound, never widen it)")
    assert not out.exists()
    # --max-delta is the replay's cap: a narrower one refuses a model the default lets in
    narrow = write_onnx(tmp_path / "narrow.onnx", role, 0.2, "adversarial")
    assert run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(out), "--delta-model", str(narrow),
                                "--max-delta", "0.1"]) == 1
    assert "max_delta 0.1 rad" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("role", ["sim_delta", "compensator"])
def test_a_model_whose_delta_leaves_its_bounds_is_clipped_and_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, role: str) -> None:
    model = write_onnx(tmp_path / "wild.onnx", role, 0.05, "adversarial")  # 1e9 rad everywhere but at zero
    out = tmp_path / "out"
    with caplog.at_level("WARNING"):
        assert run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(out), "--delta-model", str(model),
                                    "--format", "sage"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("beyond its bounds on 12 of 13 probe inputs" in w for w in warnings), warnings  # the load probe
    nominal = sage.read_motion_file(MOTION)
    ticks = len(nominal)  # one control tick per 50 Hz frame, the model's rate
    assert any(f"beyond its bounds on {ticks} of {ticks} control ticks (clipped)" in w for w in warnings), warnings
    applied, _ = sage.run_to_trajectories(sage.read_run(out, kind="sim"))
    held = np.minimum(np.round(applied.time / 0.02).astype(int), len(nominal) - 1)
    assert np.abs(applied.position - nominal.position[held]).max() <= 0.05 + 1e-9  # ~4e7 rad on main


def test_a_model_that_returns_nan_stops_the_replay_with_one_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    model = write_onnx(tmp_path / "nan.onnx", "sim_delta", 0.1, "nan_when_moving")
    out = tmp_path / "out"
    with caplog.at_level("WARNING"):
        code = run_cli(REPLAY_CLI, ["--motion", str(MOTION), "--out", str(out), "--delta-model", str(model),
                                    "--format", "sage"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]  # less tqdm's bar
    assert code == 1 and len(err) == 1, err  # main: exit 0 and one WARNING per tick
    assert err[0].startswith(f"so101 replay: error: delta model {model}: the sim-delta model returned a non-finite Δ")
    assert "stopped" in err[0]
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert not out.exists()
