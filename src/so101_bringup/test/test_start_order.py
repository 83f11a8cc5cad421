"""The order a composed graph starts its nodes in, without ROS."""

from __future__ import annotations

import pytest

from so101_bringup.node_specs import NodeSpec
from so101_bringup.start_order import LOW_PRIORITY_NICE, start_order

SPECS = [NodeSpec("m:Node", name=name) for name in ("driver", "safety", "twin", "web_view")]


def test_subscribed_first_nodes_start_before_the_rest_which_keep_the_graph_s_order() -> None:
    order = start_order(SPECS, own_process={"driver", "twin", "web_view"}, low_priority={"twin"},
                        subscribed_first={"web_view", "twin"})
    assert [s.key for s in order.first] == ["twin", "web_view"]
    assert [s.key for s in order.then] == ["driver", "safety"]
    assert order.nice("twin") == LOW_PRIORITY_NICE and order.nice("driver") == 0


def test_options_naming_nodes_wrongly_are_refused() -> None:
    with pytest.raises(ValueError, match=r"own_process names nodes the graph does not have: \['arm'\]"):
        start_order(SPECS, own_process={"arm"})
    with pytest.raises(ValueError, match=r"subscribed_first names nodes not run in their own process: \['twin'\]"):
        start_order(SPECS, own_process={"driver"}, subscribed_first={"twin"})
