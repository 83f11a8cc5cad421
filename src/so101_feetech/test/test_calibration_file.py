"""LeRobot calibration files as written: complete or absent."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from so101_common.joints import JOINTS
from so101_feetech.calibration import MotorCalibration, load_calibration, save_calibration


def _calibration(offset: int) -> dict[str, MotorCalibration]:
    return {j.name: MotorCalibration(id=j.servo_id, drive_mode=0, homing_offset=offset, range_min=1000, range_max=3000)
            for j in JOINTS}


def test_a_full_disk_leaves_the_previous_calibration_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "robots" / "so_follower" / "arm.json"
    save_calibration(path, _calibration(10))

    def full_disk(self: Path, text: str, **_kwargs: object) -> int:
        self.open("w").write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save_calibration(path, _calibration(20))
    monkeypatch.undo()
    assert {c.homing_offset for c in load_calibration(path).values()} == {10}
    assert [p.name for p in path.parent.iterdir()] == ["arm.json"]
