"""Recorder exceptions: every one names the bag or file it concerns and the cause."""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["RecorderError", "BagReadError", "io_error"]


class RecorderError(Exception):
    """Recording, recovery or export failed (bad path, permission, disk full, unknown type...)."""


class BagReadError(RecorderError):
    """A bag could not be read at all (missing, not a rosbag2 bag, unreadable)."""


def io_error(action: str, path: os.PathLike[str] | str, err: OSError, cls: type[RecorderError] = RecorderError) -> RecorderError:
    """A :class:`RecorderError` for ``err`` that says what was being done, on which path, and why.

    ``ENOSPC`` reads "No space left on device", ``EACCES`` "Permission denied": the OS's own words,
    with the errno name so scripts and logs can match on it.
    """
    name = errno.errorcode.get(err.errno, "") if err.errno else ""
    cause = err.strerror or str(err) or type(err).__name__
    where = Path(err.filename) if getattr(err, "filename", None) else Path(path)
    return cls(f"cannot {action} {where}: {cause}" + (f" ({name})" if name else ""))
