"""Paired dataset save/load: values, schema, one-line errors naming the file and key on broken folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from so101_common.paired_dataset import ARRAY_KEYS, SCHEMA_VERSION, DatasetError, PairedDataset, PairedEpisode


def make_episode(name: str = "ep", n: int = 40, seed: int = 0) -> PairedEpisode:
    rng = np.random.default_rng(seed)
    arrays = {key: rng.normal(size=(n, 6)) for key in ARRAY_KEYS}
    arrays["sim_effort"][:, 2] = np.nan
    return PairedEpisode(name=name, time=np.arange(n) / 50.0, metadata={"motion": name, "clock": {"offset": 1.5}},
                         **arrays)


def test_save_load_round_trip(tmp_path: Path) -> None:
    dataset = PairedDataset(rate_hz=50.0, episodes=[make_episode("a"), make_episode("b", 25, 1)],
                            metadata={"created_by": "test"})
    dataset.save(tmp_path / "ds")
    index = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    assert index["schema_version"] == SCHEMA_VERSION and index["units"]["real_effort"] == "N*m"
    assert [e["file"] for e in index["episodes"]] == ["episodes/a.npz", "episodes/b.npz"]
    with np.load(tmp_path / "ds" / "episodes" / "b.npz", allow_pickle=False) as raw:
        assert raw["real_position"].shape == (25, 6) and raw["real_position"].dtype == np.float64
    loaded = PairedDataset.load(tmp_path / "ds")
    assert loaded.rate_hz == 50.0 and loaded.metadata == {"created_by": "test"}
    for original, again in zip(dataset, loaded, strict=True):
        assert again.metadata == original.metadata
        for key, value in original.arrays().items():
            np.testing.assert_array_equal(getattr(again, key), value)
    assert [e.name for e in PairedDataset.load(tmp_path / "ds", episodes=["b"])] == ["b"]


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="dataset.json is missing"):
        PairedDataset.load(tmp_path)
    PairedDataset(rate_hz=50.0, episodes=[make_episode("a")]).save(tmp_path)
    index = json.loads((tmp_path / "dataset.json").read_text())
    (tmp_path / "episodes" / "a.npz").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="corrupt"):
        PairedDataset.load(tmp_path)
    (tmp_path / "episodes" / "a.npz").unlink()
    with pytest.raises(DatasetError, match="missing"):
        PairedDataset.load(tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps(index | {"schema_version": 99}))
    with pytest.raises(DatasetError, match=r"dataset.json: schema_version: Input should be 1 \(got 99\)"):
        PairedDataset.load(tmp_path)
    (tmp_path / "dataset.json").write_text("{not json")
    with pytest.raises(DatasetError, match=r"dataset.json:1:2: JSON syntax error"):
        PairedDataset.load(tmp_path)
    with pytest.raises(DatasetError, match="episodes: no episodes"):
        PairedDataset(rate_hz=50.0, episodes=[make_episode("a")]).save(tmp_path / "x")
        PairedDataset.load(tmp_path / "x", episodes=["zzz"])


def _zeros(rows: int, cols: int) -> dict[str, Any]:
    return {k: np.zeros((rows, cols)) for k in ARRAY_KEYS}


def test_episode_validation() -> None:
    with pytest.raises(DatasetError, match="shape"):
        PairedEpisode(name="e", time=np.arange(3.0), **_zeros(3, 5))
    with pytest.raises(DatasetError, match="increasing"):
        PairedEpisode(name="e", time=np.zeros(3), **_zeros(3, 6))
    with pytest.raises(DatasetError, match="name"):
        PairedEpisode(name="a/b", time=np.arange(3.0), **_zeros(3, 6))
    with pytest.raises(DatasetError, match="unique"):
        PairedDataset(rate_hz=50.0, episodes=[make_episode("a"), make_episode("a")])


def _index(tmp_path: Path) -> dict:
    PairedDataset(rate_hz=50.0, episodes=[make_episode("a")]).save(tmp_path)
    return json.loads((tmp_path / "dataset.json").read_text())


@pytest.mark.parametrize(("edit", "message"), [
    (lambda i: i | {"rate_hz": -5}, r"rate_hz: Input should be greater than 0"),
    (lambda i: i | {"rate": 50.0}, r"rate: unknown key"),
    (lambda i: i | {"format": "lerobot"}, r"format: Input should be 'so101_sim2real.paired_dataset'"),
    (lambda i: i | {"joint_names": ["a", "b"]}, r"joint_names: Value error, must be the joint spec's"),
    (lambda i: i | {"units": {}}, r"units: Value error, must be"),
    (lambda i: {k: v for k, v in i.items() if k != "episodes"}, r"episodes: Field required"),
    (lambda i: i | {"episodes": [i["episodes"][0] | {"name": "a/b"}]}, r"episodes.0.name: String should match pattern"),
    (lambda i: i | {"episodes": [i["episodes"][0] | {"samples": "many"}]}, r"episodes.0.samples: Input should be a valid integer"),
    (lambda i: i | {"episodes": [i["episodes"][0] | {"samples": 3}]}, r"holds 40 samples, dataset.json says 3"),
])
def test_a_bad_index_is_one_line_naming_file_and_key(tmp_path: Path, edit, message: str) -> None:
    index = _index(tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps(edit(index)))
    with pytest.raises(DatasetError, match=message) as caught:
        PairedDataset.load(tmp_path)
    assert "\n" not in str(caught.value)
    if "dataset.json says" not in message:
        assert str(caught.value).startswith(f"{tmp_path / 'dataset.json'}: ")


def test_the_loaded_dataset_knows_its_folder(tmp_path: Path) -> None:
    PairedDataset(rate_hz=50.0, episodes=[make_episode("a")]).save(tmp_path / "ds")
    assert PairedDataset.load(tmp_path / "ds").path == tmp_path / "ds"


def test_fault_mask_covers_each_span_and_open_ended_spans_run_to_the_end() -> None:
    episode = make_episode("faulted", n=50)  # time 0 .. 0.98 s
    episode.metadata["faults"] = [{"joint": "shoulder_lift", "fault": "overload", "start": 0.2, "end": 0.3},
                                  {"joint": "bus", "fault": "lost", "start": 0.9}]
    mask = episode.fault_mask()
    expected = ((episode.time >= 0.2) & (episode.time <= 0.3)) | (episode.time >= 0.9)
    np.testing.assert_array_equal(mask, expected)
    assert [span.fault for span in episode.faults()] == ["overload", "lost"]
    assert not make_episode("clean").fault_mask().any()


def test_malformed_fault_span_is_one_error_naming_the_episode() -> None:
    episode = make_episode("bad")
    episode.metadata["faults"] = [{"joint": "elbow_flex", "start": 0.1}]
    with pytest.raises(DatasetError, match=r"^episode bad: metadata faults\[0\]: fault: [^\n]*$"):
        episode.fault_mask()


def test_a_full_disk_leaves_no_dataset_and_keeps_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    real_savez = np.savez_compressed
    written: list[str] = []

    def savez_until_the_disk_is_full(file: Any, *args: Any, **kwargs: Any) -> None:
        if written:  # the second episode does not fit
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(str(file))
        real_savez(file, *args, **kwargs)

    monkeypatch.setattr(np, "savez_compressed", savez_until_the_disk_is_full)
    two = PairedDataset(rate_hz=50.0, episodes=[make_episode("a"), make_episode("b", 25, 1)])
    with pytest.raises(OSError, match="No space left"):
        two.save(tmp_path / "new")
    assert list(tmp_path.iterdir()) == []  # main: episodes/a.npz at the name, no index
    monkeypatch.setattr(np, "savez_compressed", real_savez)
    PairedDataset(rate_hz=50.0, episodes=[make_episode("a")]).save(tmp_path / "kept")
    written.append("full again")
    monkeypatch.setattr(np, "savez_compressed", savez_until_the_disk_is_full)
    with pytest.raises(OSError, match="No space left"):
        two.save(tmp_path / "kept")
    assert [e.name for e in PairedDataset.load(tmp_path / "kept")] == ["a"]  # the previous dataset, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
