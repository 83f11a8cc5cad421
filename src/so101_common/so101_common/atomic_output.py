"""Outputs that are complete or absent: written under a temporary name, renamed when complete.

A reader takes a file or a folder at its name for a finished one. Every output of the workspace (SAGE
folders, bags and their metadata, reports, fitted profiles, paired datasets, model files) is therefore
written under a hidden sibling name (``.<name>.partial-<pid>``, on the same file system) and renamed to its
name only once everything in it is written. An exception, Ctrl-C (``KeyboardInterrupt``) or a full disk
(``OSError``) on the way removes the temporary and re-raises: no half-written file or folder is left at
the name (a process killed with SIGKILL leaves only the hidden temporary).

- :func:`atomic_file` / :func:`write_text_atomically` / :func:`write_bytes_atomically`: one file.
- :func:`staged_folder`: a folder. A new folder is one rename. Into an existing folder (``--out .``, a
  report folder the user keeps), the staged files replace theirs one by one (each an atomic rename), the
  ``marker`` file (whose presence tells readers the folder is complete, e.g. ``dataset.json``) removed
  first and moved in last; files of the folder not written now are left alone.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["temporary_name", "atomic_file", "write_text_atomically", "write_bytes_atomically", "staged_folder",
           "publish_folder", "discard"]


def temporary_name(path: str | os.PathLike[str]) -> Path:
    """The hidden sibling ``path`` is written under until it is complete (same directory: same file system)."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{os.getpid()}")


def discard(path: str | os.PathLike[str]) -> None:
    """Remove a temporary file or folder if it is there."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path to write ``path``'s content to; renamed to ``path`` (replacing it) when the block ends,
    removed if it raises. The parent folder is created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    discard(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def write_text_atomically(path: str | os.PathLike[str], text: str) -> Path:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> Path:
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def publish_folder(staging: Path, path: Path, marker: str | None = None) -> None:
    """Move a complete ``staging`` folder to ``path`` (see the module doc for an existing ``path``)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, path)
        return
    if not path.is_dir():
        raise NotADirectoryError(f"{path} exists and is not a folder")
    if marker is not None:
        (path / marker).unlink(missing_ok=True)  # incomplete until the new marker is in
    files = sorted(p.relative_to(staging) for p in staging.rglob("*") if not p.is_dir())
    for relative in sorted(files, key=lambda p: str(p) == marker):  # the marker last
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / relative, path / relative)
    shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def staged_folder(path: str | os.PathLike[str], marker: str | None = None) -> Iterator[Path]:
    """A temporary folder to write ``path``'s files into; published to ``path`` (:func:`publish_folder`) when
    the block ends, removed if it raises."""
    path = Path(path)
    staging = temporary_name(path)
    discard(staging)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging.mkdir()
    try:
        yield staging
        publish_folder(staging, path, marker)
    except BaseException:
        discard(staging)
        raise
