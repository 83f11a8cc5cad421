"""The model file contract: every mismatch or bad file is a clear ModelFileError; good files load."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from so101_common.joints import JOINT_NAMES
from so101_gaponet.metadata import METADATA_KEY, GapModelMetadata
from so101_gaponet.model_file import ModelFileError, load_model, read_metadata, save_onnx, save_torchscript


def _with_props(src: Path, dst: Path, text: str | None) -> Path:
    proto = onnx.load(str(src))
    del proto.metadata_props[:]
    if text is not None:
        entry = proto.metadata_props.add()
        entry.key, entry.value = METADATA_KEY, text
    onnx.save(proto, str(dst))
    return dst


def _edited(src: Path, dst: Path, **changes: object) -> Path:
    record = json.loads({p.key: p.value for p in onnx.load(str(src)).metadata_props}[METADATA_KEY])
    record.update(changes)
    return _with_props(src, dst, json.dumps(record))


def test_good_files_load_with_matching_configuration(tiny) -> None:
    result, onnx_path, ts_path = tiny
    for path, fmt in ((onnx_path, "onnx"), (ts_path, "torchscript")):
        model = load_model(path, joints=JOINT_NAMES, rate_hz=50.0)
        assert model.format_name == fmt
        assert model.metadata == result.metadata
        assert model.describe()["model_kind"] == result.metadata.model_kind
        assert model.delta(np.zeros((3, 18)), np.zeros((1, 6))).shape == (6,)
        assert model.describe()["model_role"] == "compensator"


@pytest.mark.parametrize("content", [None, b"", b"\x00\x01garbage" * 10, b"just some text\n"])
def test_missing_empty_and_non_model_files(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelFileError, match="does not exist|empty|not an ONNX|neither"):
        load_model(path)


def test_truncated_torchscript_archive(tiny, tmp_path: Path) -> None:
    data = tiny[2].read_bytes()
    bad = tmp_path / "cut.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError):
        load_model(bad)


def test_metadata_missing_or_not_json(tiny, tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="no 'so101_gaponet' metadata"):
        load_model(_with_props(tiny[1], tmp_path / "a.onnx", None))
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load_model(_with_props(tiny[1], tmp_path / "b.onnx", "{not json"))
    with pytest.raises(ModelFileError, match="metadata normalisation: Field required"):
        record = json.loads(tiny[0].metadata.to_json())
        del record["normalisation"]
        load_model(_with_props(tiny[1], tmp_path / "c.onnx", json.dumps(record)))


def test_torchscript_without_metadata(tmp_path: Path, tiny) -> None:
    path = tmp_path / "plain.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(tiny[0].module), str(path))
    with pytest.raises(ModelFileError, match="no 'so101_gaponet.json' metadata"):
        load_model(path)


@pytest.mark.parametrize(("changes", "message"), [
    ({"schema_version": 99}, "schema version 99 not supported"),
    ({"schema_version": 1}, "schema version 1 not supported"),
    ({"joints": ["a", "b", "c", "d", "e", "f"]}, "joints: .*do not match the joint spec"),
    ({"model_kind": "resnet"}, "model_kind: Input should be 'deeponet', 'transformer', 'mlp', 'joint_mlp', 'linear' or 'context_mlp'"),
    ({"role": "controller"}, "role: Input should be 'compensator' or 'sim_delta'"),
    ({"history": 0}, "history: Input should be greater than or equal to 1"),
    ({"future_steps": 0}, "future_steps: Input should be greater than or equal to 1"),
    ({"future_steps": 3}, "input 'commands' has shape"),
    ({"rate_hz": -5}, "rate_hz: Input should be greater than 0"),
    ({"delta_bounds": [0.1] * 5}, "delta_bounds: expected a list of 6"),
    ({"delta_bounds": [0.1, 0.1, 0.1, 0.1, 0.1, -1]}, r"delta_bounds\.5: Input should be greater than 0"),
    ({"history_features": ["real_position"]}, "input layout"),
    ({"delta_slew_limit": [0.01] * 5}, "delta_slew_limit: expected a list of 6"),
    ({"delta_slew_limit": [0.01, 0.01, 0.01, 0.01, 0.01, 0.0]}, r"delta_slew_limit\.5: Input should be greater than 0"),
    ({"delta_smoothing_s": -0.1}, "delta_smoothing_s: Input should be greater than or equal to 0"),
    ({"unknown_key": 1}, "unknown_key: Extra inputs are not permitted"),
    ({"state_size": 7}, "state_size: a recurrent state is supported for role 'sim_delta' only"),
    ({"warmup_rows": 99}, "warmup_rows: 99 exceeds the history window"),
    ({"warmup_rows": 0}, "warmup_rows: Input should be greater than or equal to 1"),
])
def test_invalid_metadata_fields(tiny, tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ModelFileError, match=message):
        load_model(_edited(tiny[1], tmp_path / "m.onnx", **changes))


def test_slew_smoothing_and_feedback_travel_in_the_file_and_are_optional(tiny, tmp_path: Path) -> None:
    meta = load_model(tiny[1]).metadata
    assert meta.delta_slew_limit == tiny[0].metadata.delta_slew_limit
    assert meta.delta_slew_limit is not None
    np.testing.assert_allclose(meta.delta_slew_limit, np.array(meta.delta_bounds) / 3)  # the training default
    assert meta.feedback_gain == (0.05,) * 6  # the training default
    record = json.loads(meta.to_json())
    del record["delta_slew_limit"], record["delta_smoothing_s"], record["feedback_gain"]  # optional fields
    plain = load_model(_with_props(tiny[1], tmp_path / "plain.onnx", json.dumps(record))).metadata
    assert plain.delta_slew_limit is None and plain.delta_smoothing_s == 0.0 and plain.feedback_gain is None


def test_role_is_checked_against_its_user(tiny) -> None:
    assert load_model(tiny[1], role="compensator").metadata.role == "compensator"
    with pytest.raises(ModelFileError, match="model role is 'compensator' but it is used as 'sim_delta'"):
        load_model(tiny[1], role="sim_delta")


def test_node_configuration_mismatch(tiny) -> None:
    with pytest.raises(ModelFileError, match="differ from the configured joints"):
        load_model(tiny[1], joints=list(reversed(JOINT_NAMES)))
    with pytest.raises(ModelFileError, match="trained at 50.0 Hz .* node runs at 100.0 Hz"):
        load_model(tiny[2], rate_hz=100.0)


def test_graph_shapes_that_disagree_with_the_metadata(tiny, tmp_path: Path) -> None:
    result, onnx_path, _ = tiny
    # metadata says history 5 while the graph was built for 3 (normalisation resized to stay valid)
    meta = result.metadata.model_copy(update={"history": 5})
    with pytest.raises(ModelFileError, match="input 'history' has shape"):
        load_model(_with_props(onnx_path, tmp_path / "h.onnx", meta.to_json()))
    # TorchScript has no declared shapes: the probe run on the declared shapes fails
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ts = save_torchscript(result.module, meta, tmp_path / "h.pt")
    with pytest.raises(ModelFileError, match="fails on inputs of the declared shapes"):
        load_model(ts)


def test_the_metadata_reads_without_the_graph_and_is_validated(tiny, tmp_path: Path) -> None:
    """``read_metadata`` parses and validates the metadata only (no session, no probe): a file whose graph disagrees
    with its metadata still says what it declares, where ``load_model`` refuses it; a file without metadata is
    refused by both."""
    result, onnx_path, _ = tiny
    disagreeing = _with_props(onnx_path, tmp_path / "h.onnx", result.metadata.model_copy(update={"history": 5}).to_json())
    assert read_metadata(disagreeing).history == 5
    with pytest.raises(ModelFileError, match="input 'history' has shape"):
        load_model(disagreeing)
    with pytest.raises(ModelFileError, match="has no 'so101_gaponet' metadata"):
        read_metadata(_with_props(onnx_path, tmp_path / "none.onnx", None))


def test_onnx_export_refuses_invalid_metadata_early() -> None:
    with pytest.raises(ModelFileError, match="metadata role: Field required"):
        GapModelMetadata.from_json(json.dumps({"schema_version": 2}))


def test_five_joint_model_against_six_joint_node(lag_dataset, tmp_path: Path, tiny) -> None:
    result = tiny[0]
    norm = result.metadata.normalisation
    meta = GapModelMetadata.model_validate(result.metadata.model_dump() | dict(
        joints=JOINT_NAMES[:5], delta_bounds=result.metadata.delta_bounds[:5],
        delta_slew_limit=result.metadata.delta_slew_limit[:5], feedback_gain=result.metadata.feedback_gain[:5],
        normalisation=dict(history_mean=norm.history_mean[:15], history_std=norm.history_std[:15],
                           command_mean=norm.command_mean[:5], command_std=norm.command_std[:5],
                           delta_mean=norm.delta_mean[:5], delta_std=norm.delta_std[:5])))
    path = save_onnx(result.module, result.metadata, tmp_path / "six.onnx")
    with pytest.raises(ModelFileError, match="has shape"):
        load_model(_with_props(path, tmp_path / "five.onnx", meta.to_json()))
    with pytest.raises(ModelFileError, match="differ from the configured joints"):
        load_model(_with_props(path, tmp_path / "five2.onnx", meta.to_json()), joints=JOINT_NAMES)
