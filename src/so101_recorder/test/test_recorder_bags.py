"""Episode bags: written by the recorder's writer, read back by rosbags, the mcap library and our reader."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
import yaml
from mcap.exceptions import EndOfFile
from mcap.reader import make_reader
from mcap.records import Message as McapMessage
from mcap.stream_reader import StreamReader
from recorder_helpers import JOINT_STATE, joint_state, stamp_ns, stream, write_bag
from rosbags.rosbag2 import Reader

from so101_common.joints import JOINT_NAMES
from so101_recorder.bag_reader import Bag, load_joint_states, read_episode, read_joint_states
from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
from so101_recorder.errors import BagReadError, RecorderError
from so101_recorder.metadata import CUSTOM_DATA_KEY, EpisodeMetadata, load_episode
from so101_recorder.recovery import needs_recovery, recover_bag

DIAG = "diagnostic_msgs/msg/DiagnosticArray"


def _episode_messages(count: int = 300) -> list[tuple[str, str, bytes, int]]:
    states, commands = stream(count), stream(count, offset=1.0)
    messages = []
    for k in range(count):
        messages.append(("/joint_states", JOINT_STATE, states[k], stamp_ns(states[k]) + 2_000_000))
        messages.append(("/joint_command", JOINT_STATE, commands[k], stamp_ns(commands[k]) + 1_000_000))
    return messages


def test_bag_reads_back_identically_with_rosbags_and_mcap(tmp_path):
    messages = _episode_messages()
    calibration = tmp_path / "cal.json"
    calibration.write_text('{"shoulder_pan": {"id": 1}}')
    from so101_recorder.metadata import file_ref

    bag = write_bag(tmp_path / "bags", "pick place", messages, notes="first try",
                    calibration=file_ref(calibration, must_exist=True))
    assert bag.name.endswith("_pick-place_001") and bag.parent == tmp_path / "bags"
    assert sorted(p.name for p in bag.iterdir()) == sorted([f"{bag.name}.mcap", "metadata.yaml", "episode.yaml"])

    with Reader(bag) as reader:  # rosbags
        got = [(c.topic, c.msgtype, t, bytes(d)) for c, t, d in reader.messages()]
        assert reader.message_count == len(messages)
        custom = reader.storage.metadata.custom  # metadata.yaml custom_data
        assert custom is not None
        episode_yaml = custom[CUSTOM_DATA_KEY]
    written = [(topic, msgtype, t, data) for topic, msgtype, data, t in messages]
    assert got == sorted(written, key=lambda m: m[2])  # rosbags yields in timestamp order

    with (bag / f"{bag.name}.mcap").open("rb") as handle:  # the mcap library, indexed reader
        mcap_got = [(c.topic, s.name, m.log_time, m.data) for s, c, m in make_reader(handle).iter_messages(log_time_order=False)]
    assert mcap_got == written  # file order = write order

    episode = load_episode(bag)
    assert episode == EpisodeMetadata.from_dict(yaml.safe_load(episode_yaml))
    assert (episode.status, episode.robot_id, episode.task, episode.notes) == ("complete", "test_arm", "pick place", "first try")
    assert episode.calibration.sha256 == __import__("hashlib").sha256(calibration.read_bytes()).hexdigest()
    assert episode.software["package"] == "so101_recorder" and episode.software["version"]
    assert episode.topics["/joint_states"].count == 300
    assert episode.topics["/joint_states"].bytes == sum(len(m[2]) for m in messages if m[0] == "/joint_states")
    assert episode.stop_time_ns is not None and episode.start_time_ns <= episode.stop_time_ns
    assert next_episode_path(tmp_path / "bags", "pick place").name.endswith("_pick-place_002")


def test_reader_builds_trajectories_with_header_or_receive_time(tmp_path):
    bag = write_bag(tmp_path, "traj", _episode_messages(200))
    episode = read_episode(bag)
    assert sorted(episode) == ["/joint_command", "/joint_states"]
    state = episode["/joint_states"]
    assert state.names == JOINT_NAMES and state.position.shape == (200, 6)
    np.testing.assert_allclose(state.position[:, 2], 0.01 * np.arange(200) + 0.2)
    np.testing.assert_allclose(state.velocity, 0.5)
    np.testing.assert_allclose(episode["/joint_command"].position[:, 0], 0.01 * np.arange(200) + 1.0)
    np.testing.assert_allclose(np.diff(state.time), 0.01, atol=1e-6)
    receive = read_joint_states(bag, time_source="receive")
    np.testing.assert_allclose(receive.time - state.time, 0.002, atol=1e-6)
    reversed_names = read_joint_states(bag, names=tuple(reversed(JOINT_NAMES)))
    np.testing.assert_array_equal(reversed_names.position, state.position[:, ::-1])


def test_joint_order_changes_and_missing_arrays_are_handled(tmp_path):
    names = list(JOINT_NAMES)
    messages = []
    for k in range(30):
        order = names if k < 10 else names[::-1] if k < 20 else names[:5]  # reorder, then gripper missing
        values = {n: k + j / 10 for j, n in enumerate(names)}
        velocity = [1.0] * len(order) if k % 2 else []  # velocity only on odd messages, effort never
        data = joint_state(10, k * 1_000_000, order, [values[n] for n in order], velocity)
        messages.append(("/joint_states", JOINT_STATE, data, 1000 + k))
    messages.append(("/joint_states", JOINT_STATE, joint_state(11, 0, names, [1.0] * 6, [1.0] * 3), 2000))  # malformed
    read = load_joint_states(write_bag(tmp_path, "order", messages))
    traj = read.trajectory
    assert (read.messages, read.malformed, read.corrupt, len(traj)) == (31, 1, 0, 30)
    expected = np.arange(30)[:, None] + np.arange(6)[None, :] / 10
    np.testing.assert_array_equal(traj.position[:, :5], expected[:, :5])
    np.testing.assert_array_equal(traj.position[:20, 5], expected[:20, 5])
    assert np.isnan(traj.position[20:, 5]).all()
    assert np.isnan(traj.velocity[::2]).all() and (traj.velocity[1:20:2] == 1.0).all()
    assert np.isnan(traj.effort).all()
    first_order = read_joint_states(write_bag(tmp_path, "order", messages[10:20]), names=None)
    assert first_order.names == tuple(reversed(JOINT_NAMES))


def test_duplicate_and_out_of_order_stamps_are_sorted_and_counted(tmp_path):
    raws = stream(10)
    order = [0, 1, 2, 2, 5, 3, 4, 6, 7, 8, 9]
    read = load_joint_states(write_bag(tmp_path, "dup", [("/joint_states", JOINT_STATE, raws[i], n) for n, i in enumerate(order)]))
    assert read.dropped_time == 1 and len(read.trajectory) == 10
    assert (np.diff(read.trajectory.time) > 0).all()


def test_corrupted_messages_are_skipped_with_a_count(tmp_path):
    raws = stream(100)
    raws[10] = raws[10][:50]
    raws[20] = b"\x00\x05" + raws[20][2:]
    read = load_joint_states(write_bag(tmp_path, "corrupt", [("/joint_states", JOINT_STATE, r, i) for i, r in enumerate(raws)]))
    assert (read.messages, read.corrupt, len(read.trajectory)) == (100, 2, 98)
    assert any("message 10" in p for p in read.problems)


def test_truncated_bags_read_up_to_the_cut_and_recover(tmp_path):
    count = 400
    path = next_episode_path(tmp_path, "cut")
    clock = [0.0]
    with EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="cut"), flush_period_s=0.5, clock=lambda: clock[0]) as writer:
        for k, raw in enumerate(stream(count)):
            clock[0] = k * 0.01  # 100 Hz: a chunk every 0.5 s
            writer.write("/joint_states", JOINT_STATE, raw, k)
    mcap = path / f"{path.name}.mcap"
    full = mcap.read_bytes()
    (path / "metadata.yaml").unlink()
    # independent truth: where each message's serialized bytes end in the (uncompressed) file
    message_ends = [full.find(raw) + len(raw) for raw in stream(count)]
    seen = []
    for cut in (len(full) - 10, len(full) // 2, len(full) // 3 + 7, 200):
        mcap.write_bytes(full[:cut])
        read = load_joint_states(path)
        assert read.truncated and read.corrupt == 0
        # every message complete before the cut, also those of the chunk the cut went through
        assert len(read.trajectory) == sum(end <= cut for end in message_ends)
        np.testing.assert_allclose(read.trajectory.position[:, 0], 0.01 * np.arange(len(read.trajectory)), atol=1e-12)
        seen.append(len(read.trajectory))
    assert seen[0] == count and seen[-1] == 0 and 0 < seen[1] < count
    mcap.write_bytes(full[: len(full) // 2])
    assert needs_recovery(path)
    with pytest.raises(Exception):  # noqa: B017 - rosbags refuses the bag (no metadata.yaml, no footer)
        Reader(path).open()
    report = recover_bag(path)
    assert report.recovered and report.messages == seen[1] and report.damaged_file.exists()
    with Reader(path) as reader:
        assert reader.message_count == seen[1]
    assert load_episode(path).status == "recovered"
    assert not needs_recovery(path) and not recover_bag(path).recovered


def test_zstd_compressed_chunks_are_read(tmp_path):
    from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer

    path = tmp_path / "zstd_bag"
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
    writer.open()
    from recorder_helpers import TYPESTORE

    connection = writer.add_connection("/joint_states", JOINT_STATE, typestore=TYPESTORE)
    for k, raw in enumerate(stream(50)):
        writer.write(connection, k, raw)
    writer.close()
    traj = read_joint_states(path)
    np.testing.assert_allclose(traj.position[:, 0], 0.01 * np.arange(50), atol=1e-12)


def test_time_bounded_flush_puts_data_on_disk_while_recording(tmp_path):
    clock = [0.0]
    path = next_episode_path(tmp_path, "flush")
    writer = EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="flush"), flush_period_s=0.5,
                           clock=lambda: clock[0]).open()
    raws = stream(10)
    for raw in raws[:5]:
        writer.write("/joint_states", JOINT_STATE, raw, 1)
    with pytest.raises(BagReadError):
        Bag(path).raw("/joint_states")  # nothing flushed yet: no channel on disk
    clock[0] = 0.6
    writer.tick()  # no message arrived, the timer flushes
    assert len(Bag(path).raw("/joint_states")) == 5
    records: list[Any] = []
    with pytest.raises(EndOfFile):  # the mcap library reads it too, up to the (missing) footer
        records.extend(StreamReader(str(path / f"{path.name}.mcap")).records)
    assert sum(isinstance(r, McapMessage) for r in records) == 5
    writer.close()


def test_type_change_within_episode_is_refused(tmp_path):
    with EpisodeWriter(next_episode_path(tmp_path, "t"), EpisodeMetadata(name="", robot_id="r", task="t")) as writer:
        writer.write("/x", JOINT_STATE, stream(1)[0], 1)
        with pytest.raises(RecorderError, match="changed type"):
            writer.write("/x", DIAG, b"\x00\x01\x00\x00" + bytes(12), 2)


def test_disk_full_is_reported_with_path_and_cause(tmp_path):
    path = next_episode_path(tmp_path, "full")
    writer = EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="full"), flush_period_s=0.01).open()
    writer._output.file = open("/dev/full", "wb")  # the kernel answers every write with ENOSPC
    with pytest.raises(RecorderError) as info:
        for raw in stream(50):
            writer.write("/joint_states", JOINT_STATE, raw, 1)
            writer.flush()
    message = str(info.value)
    assert str(path / f"{path.name}.mcap") in message and "No space left on device" in message and "ENOSPC" in message
    assert not writer.is_open
    assert load_episode(path).status == "failed" and "ENOSPC" in (load_episode(path).error or "")


def test_a_bag_that_cannot_start_on_a_full_disk_leaves_no_empty_bag(tmp_path, monkeypatch):
    from so101_recorder import bag_writer

    def full(self: Any, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bag_writer._Output, "write", full)
    path = next_episode_path(tmp_path, "full")
    with pytest.raises(RecorderError, match="No space left on device"):
        EpisodeWriter(path, EpisodeMetadata(name="", robot_id="r", task="full")).open()
    assert list(tmp_path.iterdir()) == []  # main: the folder with a 0-byte .mcap; nothing was recorded


def _without_permission_override() -> None:
    """In the child before exec: drop CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH from the bounding set, so even
    root gets "Permission denied" on a read-only directory (exec recomputes root's capabilities from it)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_read_only_root_is_reported_with_path_and_cause(tmp_path):
    root = tmp_path / "readonly"
    root.mkdir()
    root.chmod(0o555)
    script = textwrap.dedent(f"""
        from so101_recorder.bag_writer import EpisodeWriter, next_episode_path
        from so101_recorder.errors import RecorderError
        from so101_recorder.metadata import EpisodeMetadata
        try:
            EpisodeWriter(next_episode_path({str(root)!r}, "x"), EpisodeMetadata(name="", robot_id="r", task="x")).open()
        except RecorderError as err:
            print("ERROR", err)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            preexec_fn=_without_permission_override if os.geteuid() == 0 else None)
    assert result.stdout.startswith("ERROR"), result.stdout + result.stderr
    assert str(root) in result.stdout and "Permission denied" in result.stdout
    assert errno.errorcode[errno.EACCES] in result.stdout


def test_reading_what_is_not_a_bag_fails_clearly(tmp_path):
    with pytest.raises(BagReadError, match="no such file"):
        Bag(tmp_path / "missing")
    with pytest.raises(BagReadError, match="holds no bag"):
        Bag(tmp_path)
    (tmp_path / "x.mcap").write_bytes(b"not an mcap file")
    with pytest.raises(BagReadError, match="not an MCAP file"):
        Bag(tmp_path / "x.mcap")
    bag = write_bag(tmp_path / "b", "t", _episode_messages(5))
    with pytest.raises(BagReadError, match="no topic"):
        Bag(bag).raw("/nope")


def test_read_topic_pair_requires_one_topic_and_tolerates_the_other_missing(tmp_path) -> None:
    from so101_recorder.bag_reader import read_topic_pair
    from so101_recorder.errors import BagReadError

    messages = stream(20)
    bag = write_bag(tmp_path, "pair", [("/joint_states", JOINT_STATE, m, stamp_ns(m)) for m in messages])
    states, commands = read_topic_pair(bag, "/joint_states", "/joint_command")
    assert commands is None and len(states) == 20
    np.testing.assert_allclose(states.position[3], [0.03 + 0.1 * j for j in range(6)])
    with pytest.raises(BagReadError, match=r"no topic /joint_command; it has \['/joint_states'\]"):
        read_topic_pair(bag, "/joint_command", "/joint_states")
