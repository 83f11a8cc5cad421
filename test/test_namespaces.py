"""Two virtual arms, each with its whole deploy graph under its own namespace, on one DDS domain:
every topic of the graphs is relative, so commands for one arm never reach the other."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import test_deploy_chain as deploy

from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import GraphOptions, deploy_graph
from so101_testing import wait_for

pytestmark = pytest.mark.slow

NAMESPACES = ("/arm_a", "/arm_b")


def _has_measured(probe: deploy.PolicyProbe) -> bool:
    return probe.measured is not None


def _at_rest(probe: deploy.PolicyProbe, samples: list[list[float]], window: int = 25) -> bool:
    """Polled: the last ``window`` measured poses (0.5 s at wait_for's 20 ms) within 5 mrad on every joint."""
    samples.append(list(probe.measured or []))
    recent = samples[-window:]
    return len(recent) == window and all(max(p[j] for p in recent) - min(p[j] for p in recent) < 5e-3
                                         for j in range(len(recent[0])))


def test_two_arms_in_two_namespaces_do_not_cross_talk(tmp_path: Path) -> None:
    arms, graphs, probes = [], [], []
    try:
        for ns in NAMESPACES:
            arm, link, calibration = deploy.start_virtual_arm(tmp_path / ns.strip("/"))
            arms.append(arm)
            opts = GraphOptions(port=str(link), calibration_file=str(calibration), compensation=False,
                                command_source="motion", autostart_motion=False)  # the motion player stays silent: the probe is the policy
            graphs.append(ComposedGraph(deploy_graph(opts), namespace=ns).start())
            probes.append(deploy.PolicyProbe(namespace=ns))
        for probe, arm in zip(probes, arms, strict=True):
            assert wait_for(partial(_has_measured, probe), timeout=deploy.STARTUP_TIMEOUT), arm.output()
        mover, still = probes
        # arm B's own start-up (torque on, servos configured) moves it a few centiradians off its stops: the
        # pose to keep is the one it comes to rest at, before arm A moves
        assert wait_for(partial(_at_rest, still, []), timeout=deploy.MOTION_TIMEOUT), still.measured
        start = list(still.measured or [])
        deploy.follow(mover, deploy.SAFE_POSE)  # arm A goes to the pose through its own chain
        assert still.command_count() > 0  # arm B's safety filter is alive (holding: no command source)
        assert not still.near(deploy.SAFE_POSE)  # ... and arm B never saw arm A's commands
        assert still.near(start, tolerance=0.05)
        assert all(not _near(c, deploy.SAFE_POSE) for c in still.commands_since(0))
    finally:
        for probe in probes:
            probe.close()
        for graph in graphs:
            graph.stop()
        for arm in arms:
            arm.stop()


def _near(a: list[float], b: list[float], tolerance: float = deploy.TRACKING_TOLERANCE) -> bool:
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) < tolerance
