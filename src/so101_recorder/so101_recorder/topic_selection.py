"""Which of the wanted topics a recorder records, and with which QoS, without ROS.

A topic is subscribed once it is advertised, with the first type it advertises; a type the recorder cannot
record refuses the topic for good (the reason is kept for ``/diagnostics``). The subscription's QoS follows
the publishers, as ``ros2 bag record`` chooses it: reliable only if every publisher is, transient-local
likewise (a best-effort subscriber receives from reliable publishers too; the reverse does not match).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["TopicSelection", "matching_qos"]


@dataclass
class TopicSelection:
    wanted: list[str]  # resolved topic names, in the order asked for
    subscribed: dict[str, str] = field(default_factory=dict)  # topic -> type
    refused: dict[str, str] = field(default_factory=dict)  # topic -> why it is not recorded

    def to_subscribe(self, advertised: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
        """(topic, type) of each wanted topic now advertised that is neither subscribed nor refused."""
        return [(topic, advertised[topic][0]) for topic in self.wanted
                if topic not in self.subscribed and topic not in self.refused and advertised.get(topic)]

    def missing(self) -> list[str]:
        """The wanted topics not subscribed (yet)."""
        return [topic for topic in self.wanted if topic not in self.subscribed]


def matching_qos(publishers: Sequence[tuple[bool, bool]]) -> tuple[bool, bool]:
    """``(reliable, transient_local)`` of a subscription that receives from every one of ``publishers``, each
    given as its own ``(reliable, transient_local)``; with no publisher, neither."""
    return (bool(publishers) and all(reliable for reliable, _ in publishers),
            bool(publishers) and all(latched for _, latched in publishers))
