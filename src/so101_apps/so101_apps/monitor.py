"""``so101 monitor``: watch a running arm live, from this machine or a laptop on the same ROS domain.

Runs the in-process part of the monitor graph (``so101_bringup.graphs.MONITOR``): the live gap twin (MuJoCo on
the policy's commands beside the arm) and, with ``--web``, the web view (rerun's web viewer: the arm in 3D with
the command and the twin as ghosts, joint and gap plots, servo temperature/load/voltage and faults), until
Ctrl-C. RViz is the launch file's (``ros2 launch so101_bringup monitor.launch.py``). It joins the ROS
environment it is started in (domain, discovery range, RMW), as ``ros2`` tools do.
"""

from __future__ import annotations

import argparse
import os
import threading

from so101_apps.web_view_node import WebViewNode
from so101_bringup.composition import ComposedGraph
from so101_bringup.node_specs import monitor_graph
from so101_common import topics

__all__ = ["add_arguments", "run", "WEB_VIEW", "TWIN"]

WEB_VIEW = "web_view"  # the monitor graph's nodes, by node name
TWIN = "twin"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--web", action="store_true", help="serve the web view: open the printed URL in a browser")
    parser.add_argument("--web-port", type=int, default=9090, help="HTTP port of the web view (default 9090)")
    parser.add_argument("--web-grpc-port", type=int, default=9876, help="port of its live data (default 9876)")
    parser.add_argument("--web-rate", type=float, default=30.0,
                        help="updates per second sent to browsers, at most (default 30; lower for slow clients)")
    parser.add_argument("--host", default="", help="the address a browser reaches this machine at (default: its name)")
    parser.add_argument("--namespace", default="", help="the arm's namespace (a graph run under one, e.g. /arm1)")
    parser.add_argument("--no-twin", action="store_true", help="without the live gap twin")
    parser.add_argument("--band-file", default="", help="the twin's band file (so101 twin-band): warn when a joint "
                                                        "leaves it")
    parser.add_argument("--sim-delta-model", default="", help="the twin's sim-delta model (default: nominal MuJoCo)")
    parser.add_argument("--command-topic", default=topics.JOINT_COMMAND,
                        help=f"command shown as the blue ghost (default {topics.JOINT_COMMAND}: what the driver is told)")
    parser.add_argument("--use-sim-time", action="store_true", help="use /clock")


def run(args: argparse.Namespace) -> int:
    if args.no_twin and not args.web:
        raise ValueError("nothing to run: give --web, or leave the twin on (RViz: ros2 launch so101_bringup "
                         "monitor.launch.py)")
    arguments = {"twin": str(not args.no_twin).lower(), "twin_band_file": args.band_file,
                 "twin_sim_delta_model": args.sim_delta_model, "web": str(args.web).lower(),
                 "web_port": str(args.web_port), "web_grpc_port": str(args.web_grpc_port), "web_host": args.host,
                 "web_rate_hz": str(args.web_rate),
                 "command_topic": args.command_topic, "use_sim_time": str(args.use_sim_time).lower(), "rviz": "false"}
    domain = os.environ.get("ROS_DOMAIN_ID", "0")
    with ComposedGraph(monitor_graph(arguments), namespace=args.namespace) as graph:
        running = [name for name in (TWIN, WEB_VIEW) if name in graph.nodes]
        print(f"so101 monitor: {', '.join(running)} on ROS domain {domain}"
              + (f", namespace {args.namespace}" if args.namespace else "") + "; Ctrl-C to stop", flush=True)
        if WEB_VIEW in graph.nodes:
            print(f"web view: {graph.node(WEB_VIEW, WebViewNode).url}", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0
