"""A composed node whose callback raises stops; the graph says which node and why instead of running on without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from so101_bringup.composition import ComposedGraph, NodeFailed
from so101_bringup.node_specs import NodeSpec
from so101_testing import wait_for

FAILING_NODE = '''
from rclpy.node import Node


class FailingNode(Node):
    """Raises in its first timer callback, as a node with a bug in a subscription callback does."""

    def __init__(self, **kwargs):
        super().__init__("failing", **kwargs)
        self.create_timer(0.01, self._tick)

    def _tick(self):
        raise TypeError("update_measured() takes from 2 to 4 positional arguments but 5 were given")
'''


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # its traceback is printed too
def test_a_composed_node_whose_callback_raises_is_named_with_its_error(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "failing_node.py").write_text(FAILING_NODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with ComposedGraph([NodeSpec("failing_node:FailingNode", name="compensator")]) as graph:
        assert wait_for(graph.node_stopped, timeout=10.0)
        with pytest.raises(NodeFailed) as failed:
            graph.raise_for_stopped_nodes()
    assert str(failed.value) == ("node compensator stopped: TypeError: update_measured() takes from 2 to 4 "
                                 "positional arguments but 5 were given")
    sys.modules.pop("failing_node", None)
