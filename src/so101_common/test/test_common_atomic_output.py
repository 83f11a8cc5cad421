"""so101_common.atomic_output: an output is complete at its name or absent (a full disk, an exception, Ctrl-C)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from so101_common.atomic_output import atomic_file, staged_folder, write_text_atomically


def disk_full(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    write_text_atomically(path, "a: 1\n")
    with pytest.raises(OSError, match="No space left"), atomic_file(path) as tmp:
        tmp.write_text("a: 2\n")  # half of the new content reached the disk
        disk_full()
    assert path.read_text() == "a: 1\n"  # the previous file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]  # no temporary left


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, OSError])
def test_a_new_folder_appears_only_complete(tmp_path: Path, interruption: type[BaseException]) -> None:
    out = tmp_path / "run"
    with pytest.raises(interruption), staged_folder(out, marker="state_motor.csv") as staging:
        (staging / "control.csv").write_text("complete\n")
        raise interruption()
    assert list(tmp_path.iterdir()) == []
    with staged_folder(out, marker="state_motor.csv") as staging:
        (staging / "control.csv").write_text("c\n")
        (staging / "state_motor.csv").write_text("s\n")
    assert sorted(p.name for p in out.iterdir()) == ["control.csv", "state_motor.csv"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_into_an_existing_folder_the_old_output_stays_whole_until_the_new_one_is(tmp_path: Path) -> None:
    out = tmp_path / "dataset"
    (out / "episodes").mkdir(parents=True)
    (out / "notes.txt").write_text("the user's\n")
    (out / "episodes" / "a.npz").write_text("old a\n")
    (out / "dataset.json").write_text("old index\n")
    with pytest.raises(OSError), staged_folder(out, marker="dataset.json") as staging:
        (staging / "episodes").mkdir()
        (staging / "episodes" / "a.npz").write_text("new a\n")
        disk_full()
    assert (out / "dataset.json").read_text() == "old index\n" and (out / "episodes" / "a.npz").read_text() == "old a\n"
    with staged_folder(out, marker="dataset.json") as staging:
        (staging / "episodes").mkdir()
        (staging / "episodes" / "a.npz").write_text("new a\n")
        (staging / "dataset.json").write_text("new index\n")
    assert (out / "dataset.json").read_text() == "new index\n" and (out / "episodes" / "a.npz").read_text() == "new a\n"
    assert (out / "notes.txt").read_text() == "the user's\n"  # files not written now are left alone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dataset"]
