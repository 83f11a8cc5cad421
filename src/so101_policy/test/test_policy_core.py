"""so101_policy core without torch: units, joint order, metadata, the ONNX runner and the async action queue."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

import numpy as np
import pytest

from so101_common.joints import GRIPPER, JOINT_NAMES, gripper_rad_to_percent
from so101_policy.images import image_to_chw
from so101_policy.loading import detect_kind, load_policy
from so101_policy.metadata import spec_from_metadata
from so101_policy.runner import AsyncPolicyRunner, PolicyRunner
from so101_policy.spec import (
    FeatureMismatchError,
    MissingImageError,
    PolicyLoadError,
    PolicyObservation,
    PolicySpec,
    default_feature_names,
    joint_order,
)
from so101_policy.tiny import DEFAULT_STEP, TINY_IMAGE_KEY, make_offset_onnx
from so101_testing import wait_for

Q = np.array([0.1, -0.2, 0.3, -0.4, 0.5, 0.6])  # rad, JOINT_NAMES order


def lerobot_units(q: np.ndarray) -> np.ndarray:
    """Independent reference: degrees for the arm, 0..100 for the gripper."""
    out = np.degrees(q)
    out[5] = (q[5] - GRIPPER.lower) / (GRIPPER.upper - GRIPPER.lower) * 100.0
    return out


# ------------------------------------------------------------------------------------ spec and units
def test_spec_converts_rad_to_lerobot_units_and_back():
    spec = PolicySpec(kind="onnx", source="x", policy_type="onnx", chunk_size=3, n_action_steps=3)
    state = spec.state_from_rad(Q)
    assert state.dtype == np.float32
    np.testing.assert_allclose(state, lerobot_units(Q), rtol=1e-6)
    assert state[5] == pytest.approx(gripper_rad_to_percent(0.6), rel=1e-6)
    back = spec.actions_to_rad(np.stack([lerobot_units(Q)] * 2))
    assert back.shape == (2, 6)
    np.testing.assert_allclose(back, np.stack([Q, Q]), atol=1e-9)
    # gripper limits map onto 0 and 100
    assert spec.state_from_rad([0, 0, 0, 0, 0, GRIPPER.lower])[5] == pytest.approx(0.0, abs=1e-5)
    assert spec.state_from_rad([0, 0, 0, 0, 0, GRIPPER.upper])[5] == pytest.approx(100.0, abs=1e-4)


def test_spec_reorders_state_and_actions_by_feature_names():
    order = ["gripper.pos", "wrist_roll.pos", "shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos",
             "wrist_flex.pos"]
    spec = PolicySpec(kind="onnx", source="x", policy_type="onnx", state_names=tuple(order),
                      action_names=tuple(reversed(order)), units="rad")
    state = spec.state_from_rad(Q)
    assert state.tolist() == pytest.approx([Q[JOINT_NAMES.index(n.split(".")[0])] for n in order])
    actions = np.array([[Q[JOINT_NAMES.index(n.split(".")[0])] for n in reversed(order)]])
    np.testing.assert_allclose(spec.actions_to_rad(actions)[0], Q)


def test_joint_order_errors_name_the_problem():
    assert joint_order(default_feature_names(), "state") == tuple(range(6))
    assert joint_order(list(JOINT_NAMES), "state") == tuple(range(6))  # bare names are accepted
    with pytest.raises(FeatureMismatchError, match=r"unknown \['elbow.pos'\].*missing \['elbow_flex'\]"):
        joint_order([n.replace("elbow_flex", "elbow") for n in default_feature_names()], "state")
    with pytest.raises(FeatureMismatchError, match="missing"):
        joint_order(default_feature_names()[:5], "action")
    with pytest.raises(FeatureMismatchError, match="duplicated"):
        joint_order([*default_feature_names()[:5], "shoulder_pan.pos"], "action")


def test_metadata_validation_errors():
    ok = {"chunk_size": 4, "n_action_steps": 2, "units": "rad", "rate_hz": 50}
    spec = spec_from_metadata(ok, kind="onnx", source="m")
    assert (spec.chunk_size, spec.n_action_steps, spec.units, spec.rate_hz) == (4, 2, "rad", 50.0)
    with pytest.raises(PolicyLoadError, match="units 'deg'"):
        spec_from_metadata({**ok, "units": "deg"}, kind="onnx", source="m")
    with pytest.raises(PolicyLoadError, match="n_action_steps"):
        spec_from_metadata({**ok, "n_action_steps": 5}, kind="onnx", source="m")
    with pytest.raises(PolicyLoadError, match=r"^m: chunk: unknown key \(did you mean 'chunk_size'\?\)"):
        spec_from_metadata({**ok, "chunk": 3}, kind="onnx", source="m")
    with pytest.raises(PolicyLoadError, match=r"^m: rate_hz: .*greater than or equal to 0"):
        spec_from_metadata({**ok, "rate_hz": -1}, kind="onnx", source="m")
    with pytest.raises(PolicyLoadError, match="schema_version"):
        spec_from_metadata({**ok, "schema_version": 9}, kind="onnx", source="m")
    with pytest.raises(PolicyLoadError, match="shape"):
        spec_from_metadata({**ok, "image_features": {TINY_IMAGE_KEY: [3, 8]}}, kind="onnx", source="m")
    with pytest.raises(FeatureMismatchError, match="SO-101"):
        spec_from_metadata({**ok, "state_names": ["a", "b"]}, kind="onnx", source="m")


def test_image_to_chw_scales_resizes_and_converts_channels():
    img = np.full((48, 64, 3), 255, np.uint8)
    out = image_to_chw(img, (3, 24, 32))
    assert out.shape == (3, 24, 32) and out.dtype == np.float32
    assert out.max() == pytest.approx(1.0)
    assert image_to_chw(np.zeros((10, 10), np.uint8), (3, 10, 10)).shape == (3, 10, 10)
    assert image_to_chw(np.zeros((10, 10, 3), np.uint8), (1, 5, 5)).shape == (1, 5, 5)
    with pytest.raises(MissingImageError, match="shape"):
        image_to_chw(np.zeros((2, 2, 2, 2), np.uint8), (3, 2, 2))


# ----------------------------------------------------------------------------------- loading errors
def test_missing_paths_and_unknown_kinds(tmp_path):
    with pytest.raises(PolicyLoadError, match="does not exist"):
        load_policy(tmp_path / "nope")
    with pytest.raises(PolicyLoadError, match="empty"):
        load_policy("")
    with pytest.raises(PolicyLoadError, match="no config.json"):
        load_policy(tmp_path)
    (tmp_path / "pretrained_model").mkdir()
    with pytest.raises(PolicyLoadError, match="pretrained_model/ subfolder"):
        load_policy(tmp_path)
    weird = tmp_path / "model.bin"
    weird.write_bytes(b"x")
    with pytest.raises(PolicyLoadError, match="cannot tell the kind"):
        detect_kind(weird)
    with pytest.raises(PolicyLoadError, match="unknown policy kind"):
        load_policy(weird, kind="tensorflow")
    with pytest.raises(PolicyLoadError, match="not a loadable ONNX"):
        load_policy(weird, kind="onnx")


def test_lerobot_directory_errors_before_any_heavy_import(tmp_path):
    """Unknown types, missing processors and feature mismatches are caught from config.json alone."""
    d = tmp_path / "pretrained_model"
    d.mkdir()
    config: dict[str, Any] = {"type": "act", "chunk_size": 10, "n_action_steps": 10,
              "input_features": {"observation.state": {"type": "STATE", "shape": [6]},
                                 "observation.images.front": {"type": "VISUAL", "shape": [3, 8, 8]}},
              "output_features": {"action": {"type": "ACTION", "shape": [6]}}}

    def write(**changes):
        (d / "config.json").write_text(json.dumps({**config, **changes}))

    write()
    with pytest.raises(PolicyLoadError, match=r"missing processor file\(s\) \['policy_preprocessor.json', "
                                              r"'policy_postprocessor.json'\]"):
        load_policy(d)
    (d / "policy_preprocessor.json").write_text("{}")
    (d / "policy_postprocessor.json").write_text("{}")
    write(input_features={"observation.state": {"type": "STATE", "shape": [7]}})
    with pytest.raises(FeatureMismatchError, match=r"shape \[7\].*6 joints"):
        load_policy(d)
    write(output_features={"action": {"type": "ACTION", "shape": [14]}})
    with pytest.raises(FeatureMismatchError, match="'action' has shape"):
        load_policy(d)
    write(input_features={**config["input_features"],
                          "observation.environment_state": {"type": "ENV", "shape": [3]}})
    with pytest.raises(FeatureMismatchError, match="environment_state"):
        load_policy(d)
    write(type="sarm")
    with pytest.raises(PolicyLoadError, match="reward model"):
        load_policy(d)
    write(type=None)
    with pytest.raises(PolicyLoadError, match="no policy 'type'"):
        load_policy(d)
    write()
    (d / "so101_policy.json").write_text(json.dumps({"state_names": ["a.pos"] * 6}))
    with pytest.raises(FeatureMismatchError, match="unknown"):
        load_policy(d)


# ----------------------------------------------------------------------------------------- ONNX runner
def test_onnx_offset_policy_units_order_and_chunk(tmp_path):
    path = make_offset_onnx(tmp_path / "offset.onnx", chunk_size=5, n_action_steps=4, rate_hz=50)
    runner = PolicyRunner(load_policy(path))
    assert runner.spec.kind == "onnx" and runner.spec.rate_hz == 50.0
    actions = runner.infer(Q)
    assert actions.shape == (4, 6)  # n_action_steps of the 5-step chunk
    expected = lerobot_units(Q)[None, :] + np.arange(1, 5)[:, None] * np.array(DEFAULT_STEP)[None, :]
    np.testing.assert_allclose(runner.spec.state_from_rad(actions[0]), expected[0], rtol=1e-5, atol=1e-4)
    # arm joints: +1°, -1°, ... per step in rad; gripper: +1 % of its span per step
    assert actions[1, 0] - actions[0, 0] == pytest.approx(math.radians(DEFAULT_STEP[0]), abs=1e-6)
    assert actions[1, 5] - actions[0, 5] == pytest.approx(GRIPPER.span * DEFAULT_STEP[5] / 100, abs=1e-6)


def test_onnx_sidecar_metadata_and_image_input(tmp_path):
    path = make_offset_onnx(tmp_path / "img.onnx", chunk_size=3, image_shape=(3, 8, 8), embed=False)
    assert (tmp_path / "img.onnx.json").is_file()
    model = load_policy(path)
    assert dict(model.spec.image_features) == {TINY_IMAGE_KEY: (3, 8, 8)}
    with pytest.raises(MissingImageError, match="not configured"):
        PolicyRunner(model, configured_images=[])
    runner = PolicyRunner(model, configured_images=[TINY_IMAGE_KEY])
    with pytest.raises(MissingImageError, match="none received"):
        runner.infer(Q)
    white = runner.infer(Q, {TINY_IMAGE_KEY: np.full((16, 16, 3), 255, np.uint8)})  # resized to 8x8
    black = runner.infer(Q, {TINY_IMAGE_KEY: np.zeros((8, 8, 3), np.uint8)})
    assert white[0, 0] - black[0, 0] == pytest.approx(math.radians(1.0), abs=1e-6)  # + mean(image) = 1
    (tmp_path / "img.onnx.json").write_text("{not json")
    with pytest.raises(PolicyLoadError, match=r"img\.onnx\.json:1:2: JSON syntax error"):
        load_policy(path)
    (tmp_path / "img.onnx.json").unlink()
    with pytest.raises(PolicyLoadError, match="no policy metadata"):
        load_policy(path)


def test_onnx_inputs_must_match_metadata(tmp_path):
    path = make_offset_onnx(tmp_path / "p.onnx", chunk_size=3, embed=False)
    meta = json.loads((tmp_path / "p.onnx.json").read_text())
    meta["image_features"] = {TINY_IMAGE_KEY: [3, 8, 8]}
    (tmp_path / "p.onnx.json").write_text(json.dumps(meta))
    with pytest.raises(FeatureMismatchError, match="missing"):
        load_policy(path)


# ---------------------------------------------------------------------------------- async action queue
class FakeModel:
    """A policy in rad whose chunk encodes (inference number, step): action[i] = [k, i, 0, 0, 0, 0]."""

    def __init__(self, chunk: int = 4, delay: float = 0.0, fail: bool = False) -> None:
        self.spec = PolicySpec(kind="fake", source="fake", policy_type="fake", units="rad", chunk_size=chunk,
                               n_action_steps=chunk)
        self.delay = delay
        self.fail = fail
        self.calls = 0
        self.entered = 0
        self.resets = 0
        self.release = threading.Event()
        self.release.set()

    def predict(self, obs: PolicyObservation) -> np.ndarray:
        self.entered += 1
        self.release.wait(5.0)
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("boom")
        self.calls += 1
        out = np.zeros((self.spec.chunk_size, 6))
        out[:, 0] = self.calls
        out[:, 1] = np.arange(self.spec.chunk_size)
        out[:, 2] = obs.state[0]
        return out

    def reset(self) -> None:
        self.resets += 1


def tick_until(runner: AsyncPolicyRunner, status: str, timeout: float = 5.0):
    results = []

    def reached() -> bool:
        results.append(runner.tick())
        return results[-1].status == status

    assert wait_for(reached, timeout, interval=0.005), f"no {status!r} tick"
    return results[-1]
def _action(result: Any) -> np.ndarray:
    assert result.action is not None
    return np.asarray(result.action)




def test_queue_serves_a_chunk_then_refills_with_the_latest_observation():
    model = FakeModel(chunk=4)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=0, align_chunks=False) as runner:
        assert runner.tick().status == "stopped"
        runner.start()
        assert runner.tick().status == "waiting"  # no observation yet: nothing to infer on
        runner.set_positions(Q)
        first = tick_until(runner, "fresh")
        steps = [first.action[1]]
        for _ in range(2):
            steps.append(_action(runner.tick())[1])
        runner.set_positions(Q + 1.0)
        steps.append(_action(runner.tick())[1])  # the queue runs out: the next inference is requested now
        assert steps == [0, 1, 2, 3] and first.action[0] == 1  # the whole chunk, in order
        nxt = tick_until(runner, "fresh")
        assert nxt.action[0] == 2 and nxt.action[1] == 0
        assert nxt.action[2] == pytest.approx(Q[0] + 1.0)  # inferred on the latest positions
        assert model.resets == 1
        stats = runner.stats()
        assert stats.inferences == 2 and stats.errors == 0 and stats.latency_p50_ms >= 0


def test_a_fresh_tick_hands_out_the_rest_of_the_chunk():
    model = FakeModel(chunk=4)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=0, align_chunks=False) as runner:
        runner.set_positions(Q)
        runner.start()
        first = tick_until(runner, "fresh")
        assert first.chunk is not None and first.chunk[:, 1].tolist() == [0, 1, 2, 3]  # this action, then 3 queued
        assert np.array_equal(first.chunk[0], first.action)
        second = runner.tick()
        assert second.chunk is not None and second.chunk[:, 1].tolist() == [1, 2, 3]
    with AsyncPolicyRunner(PolicyRunner(FakeModel(chunk=1))) as single:
        single.set_positions(Q)
        single.start()
        assert tick_until(single, "fresh").chunk is None  # one action per inference: no chunk


def test_chunks_are_aligned_to_the_tick_of_their_observation():
    model = FakeModel(chunk=8)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=2) as runner:
        runner.set_positions(Q)
        runner.start()
        model.release.clear()
        assert runner.tick().status == "waiting"  # request made at tick 1
        for _ in range(2):
            assert runner.tick().status == "waiting"
        model.release.set()
        assert wait(lambda: runner.stats().pending is False)
        result = runner.tick()  # tick 4: actions 0..2 belonged to ticks 1..3
        assert result.status == "fresh" and _action(result)[1] == 3
        assert runner.stats().dropped_stale == 3


def test_a_tick_never_waits_for_a_running_inference_and_holds_the_last_action():
    """The model is held inside an inference until released (no clock in the test): every tick meanwhile returns the
    last action, held, and counts a miss; a tick that waited for the model would return only after it had finished."""
    model = FakeModel(chunk=3)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=1) as runner:
        runner.set_positions(Q)
        runner.start()
        ticks = [tick_until(runner, "fresh")]
        model.release.clear()

        def asked() -> bool:
            ticks.append(runner.tick())
            return model.entered == 2

        assert wait(asked), "the next inference was never asked for"
        while runner.queue_depth():
            ticks.append(runner.tick())
        last = _action(ticks[-1])
        results = [runner.tick() for _ in range(20)]
        assert model.calls == 1, "a tick waited for the model"
        assert [r.status for r in results] == ["held"] * 20
        assert all(np.array_equal(_action(r), last) for r in results)
        assert runner.stats().missed == [t.status for t in ticks + results].count("held")
        model.release.set()
        assert _action(tick_until(runner, "fresh"))[0] == 2  # the second chunk, once the model returns
        assert runner.stats().inferences == 2


def test_on_miss_none_publishes_nothing_when_late():
    model = FakeModel(chunk=2, delay=0.1)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=0, on_miss="none") as runner:
        runner.set_positions(Q)
        runner.start()
        tick_until(runner, "fresh")
        missed = tick_until(runner, "missed")
        assert missed.action is None


def test_stop_discards_queue_and_pending_result_and_start_resets_the_model():
    model = FakeModel(chunk=4)
    with AsyncPolicyRunner(PolicyRunner(model), refill_threshold=0) as runner:
        runner.set_positions(Q)
        runner.start()
        tick_until(runner, "fresh")
        model.release.clear()
        for _ in range(4):
            runner.tick()  # drains the queue, requests the next chunk (blocked)
        assert wait(lambda: model.entered == 2)
        runner.stop()
        model.release.set()
        assert wait(lambda: not runner.stats().pending)
        assert runner.tick().status == "stopped" and runner.queue_depth() == 0
        runner.start()
        assert runner.tick().status == "waiting"  # the pre-stop chunk was not served
        assert tick_until(runner, "fresh").action[0] == 3
        assert model.resets == 2


def test_inference_errors_are_counted_not_raised():
    model = FakeModel(chunk=2, fail=True)
    with AsyncPolicyRunner(PolicyRunner(model)) as runner:
        runner.set_positions(Q)
        runner.start()
        statuses = []

        def errored() -> bool:
            statuses.append(runner.tick().status)
            return runner.stats().errors >= 1

        assert wait_for(errored, 5.0, 0.005)
        assert set(statuses) == {"waiting"}  # a failed inference never yields an action
        assert "boom" in runner.stats().last_error


def test_stale_observation_starts_no_inference():
    now = [0.0]
    model = FakeModel(chunk=2)
    with AsyncPolicyRunner(PolicyRunner(model), max_observation_age_s=0.5, clock=lambda: now[0]) as runner:
        runner.set_positions(Q)
        runner.start()
        now[0] = 1.0
        for _ in range(10):
            runner.tick()
            assert not runner.stats().pending  # the tick requested nothing: no inference to wait for
        assert model.calls == 0 and runner.stats().observation_age_s == pytest.approx(1.0)


def test_runner_option_validation():
    runner = PolicyRunner(FakeModel(chunk=4))
    with pytest.raises(ValueError, match="on_miss"):
        AsyncPolicyRunner(runner, on_miss="skip")
    with pytest.raises(ValueError, match="n_action_steps"):
        AsyncPolicyRunner(runner, n_action_steps=5)
    with pytest.raises(ValueError, match="refill_threshold"):
        AsyncPolicyRunner(runner, refill_threshold=5)
    with AsyncPolicyRunner(runner, refill_threshold=4) as always:  # a whole chunk: ask whenever none is in flight
        assert always.refill_threshold == 4
    with pytest.raises(ValueError, match="finite"):
        runner.infer([0, 0, 0, 0, 0, float("nan")])


def wait(predicate, timeout: float = 5.0) -> bool:
    return wait_for(predicate, timeout, interval=0.005)


# ------------------------------------------------------------------------------------- node helpers
def test_parse_image_topics_and_image_messages():
    from sensor_msgs.msg import Image

    from so101_policy.images import image_msg_to_array, parse_image_topics

    assert parse_image_topics(["front=/cam/front", "observation.images.wrist = /cam/wrist", ""]) == {
        "observation.images.front": "/cam/front", "observation.images.wrist": "/cam/wrist"}
    assert parse_image_topics(None) == {}
    with pytest.raises(ValueError, match="not 'observation.images"):
        parse_image_topics(["front"])
    with pytest.raises(ValueError, match="twice"):
        parse_image_topics(["front=/a", "observation.images.front=/b"])

    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    msg = Image(height=2, width=3, encoding="bgr8", step=12)  # row padding of 3 bytes
    msg.data = b"".join(row.tobytes() + b"\0\0\0" for row in rgb[:, :, ::-1].reshape(2, 9))
    np.testing.assert_array_equal(image_msg_to_array(msg), rgb)
    with pytest.raises(ValueError, match="encoding"):
        image_msg_to_array(Image(height=1, width=1, encoding="yuv422", step=2, data=b"\0\0"))
    with pytest.raises(ValueError, match="too short"):
        image_msg_to_array(Image(height=2, width=2, encoding="rgb8", step=6, data=b"\0" * 6))


def test_tick_benchmark_reports_against_its_baseline():
    from so101_policy.bench import bench_tick

    result = bench_tick(calls=200)
    assert result.name == "policy.tick_us" and result.value > 0 and result.baseline > 0
    assert result.better == "lower" and result.value < 1000.0  # far below one 50 Hz period either way
