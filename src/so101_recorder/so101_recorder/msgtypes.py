"""Message definitions and type hashes for the bag's schema records, without importing message classes.

A rosbag2 MCAP file carries, per type, the concatenated ``.msg`` definition (schema) and the
RIHS01 type hash (``metadata.yaml``). ``rosbags``' ROS 2 Jazzy typestore knows the common types; a
type it lacks is looked up as ``share/<pkg>/msg/<Type>.msg`` under ``AMENT_PREFIX_PATH`` and this
Python prefix (where the ROS wheels put them), with its dependencies, and registered on the fly.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from so101_recorder.errors import RecorderError

__all__ = ["TypeLibrary", "message_class"]


def message_class(msgtype: str) -> type:
    """The Python class of ROS message type ``pkg/msg/Name`` (for a raw subscription); :class:`RecorderError`
    when it is not installed or not a message type name."""
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise RecorderError(f"no Python message class ({err})") from err


class TypeLibrary:
    """``msgtype -> (msgdef, rihs01)``, cached; unknown types resolved from ``.msg`` files."""

    def __init__(self, typestore: Typestore | None = None, search_dirs: list[Path] | None = None) -> None:
        self.typestore = typestore if typestore is not None else get_typestore(Stores.ROS2_JAZZY)
        self.search_dirs = search_dirs if search_dirs is not None else _share_dirs()
        self._cache: dict[str, tuple[str, str]] = {}

    def definition(self, msgtype: str) -> tuple[str, str]:
        """The ``(msgdef, rihs01)`` pair of ``msgtype`` (``pkg/msg/Type``)."""
        if msgtype not in self._cache:
            for _ in range(64):  # each round registers one missing (dependency) type
                try:
                    msgdef, _deps = self.typestore.generate_msgdef(msgtype, ros_version=2)
                    self._cache[msgtype] = (msgdef, self.typestore.hash_rihs01(msgtype))
                    break
                except (KeyError, TypesysError) as err:
                    found = _UNKNOWN.search(str(err))
                    self._register(found.group(1) if found else msgtype, wanted=msgtype)
            else:
                raise RecorderError(f"cannot resolve the definition of {msgtype}: too many nested types")
        return self._cache[msgtype]

    def register_definition(self, msgtype: str, msgdef: str) -> None:
        """Register ``msgtype`` from a rosbag2 schema text (the ``.msg`` then ``MSG: pkg/Type`` sections)."""
        sections = msgdef.split("=" * 80 + "\n")
        types = dict(get_types_from_msg(sections[0], msgtype))
        for section in sections[1:]:
            head, _, body = section.partition("\n")
            types.update(get_types_from_msg(body, _normalise(head.removeprefix("MSG: ").strip())))
        self.typestore.register({k: v for k, v in types.items() if k not in self.typestore.fielddefs})

    def _register(self, missing: str, wanted: str) -> None:
        missing = _normalise(missing)
        if missing in self.typestore.fielddefs:
            raise RecorderError(f"cannot resolve the definition of {wanted}: {missing} is known but still fails")
        parts = missing.split("/")
        if len(parts) != 3:
            raise RecorderError(f"cannot resolve the definition of {wanted}: bad type name {missing!r}")
        for base in self.search_dirs:
            path = base / parts[0] / parts[1] / f"{parts[2]}.msg"
            if path.is_file():
                self.typestore.register(get_types_from_msg(path.read_text(encoding="utf-8"), missing))
                return
        raise RecorderError(f"unknown message type {missing} (needed for {wanted}): not in rosbags' ROS 2 Jazzy "
                            f"typestore and no {parts[0]}/{parts[1]}/{parts[2]}.msg under {[str(d) for d in self.search_dirs]}")


_UNKNOWN = re.compile(r"Type '([^']+)' is unknown")


def _normalise(name: str) -> str:
    name = name.strip("'\"")
    parts = name.split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else name


def _share_dirs() -> list[Path]:
    dirs = [Path(p) / "share" for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    dirs.append(Path(sys.prefix) / "share")
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]
