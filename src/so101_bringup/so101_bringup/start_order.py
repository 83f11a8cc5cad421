"""In what order a composed graph starts its nodes, and where each one runs (ROS-free; :mod:`.composition` runs it).

``own_process``: nodes run as child processes rather than in the graph's process. ``low_priority``: of those,
the ones started at nice +10 (monitors, which must never take the CPU from the driver and the arm's bus).
``subscribed_first``: of those, the ones started before every other node, which start once each of these has its
subscriptions on the graph (a subscriber joining a running publisher can hold its ``publish`` in Fast DDS:
:class:`~so101_bringup.composition.ComposedGraph`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from so101_bringup.node_specs import NodeSpec

__all__ = ["LOW_PRIORITY_NICE", "StartOrder", "start_order"]

LOW_PRIORITY_NICE = 10


@dataclass(frozen=True)
class StartOrder:
    first: tuple[NodeSpec, ...]  # started first, each in its own process, and waited on until subscribed
    then: tuple[NodeSpec, ...]  # every other node, in the graph's order
    own_process: frozenset[str]
    low_priority: frozenset[str]

    def nice(self, key: str) -> int:
        """The scheduling priority node ``key``'s process starts at."""
        return LOW_PRIORITY_NICE if key in self.low_priority else 0


def start_order(specs: Sequence[NodeSpec], own_process: Collection[str] = (), low_priority: Collection[str] = (),
                subscribed_first: Collection[str] = ()) -> StartOrder:
    """The :class:`StartOrder` of ``specs``; ``ValueError`` naming any node the options name wrongly."""
    unknown = set(own_process) - {spec.key for spec in specs}
    if unknown:
        raise ValueError(f"own_process names nodes the graph does not have: {sorted(unknown)}")
    for option, names in (("low_priority", low_priority), ("subscribed_first", subscribed_first)):
        if not set(names) <= set(own_process):
            raise ValueError(f"{option} names nodes not run in their own process: {sorted(set(names) - set(own_process))}")
    return StartOrder(first=tuple(spec for spec in specs if spec.key in subscribed_first),
                      then=tuple(spec for spec in specs if spec.key not in subscribed_first),
                      own_process=frozenset(own_process), low_priority=frozenset(low_priority))
