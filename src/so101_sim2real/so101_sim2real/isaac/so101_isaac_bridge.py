"""SO-101 in Isaac Sim behind the ROS 2 bridge topics the workspace replays against.

Run with Isaac Sim's own Python (not the workspace venv), Isaac Sim 5.0 or 5.1, with the ROS 2
Jazzy bridge's environment set before Isaac Sim starts (see docs/ISAAC_SIM.md)::

    export ROS_DISTRO=jazzy RMW_IMPLEMENTATION=rmw_fastrtps_cpp
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$HOME/isaacsim/exts/isaacsim.ros2.bridge/jazzy/lib
    ./python.sh so101_isaac_bridge.py --urdf /path/to/so101.urdf [--kp 1000 --kd 2 --frame-hz 50 --headless --play]

(the URDF with absolute mesh paths: ``python -c "from so101_description.paths import urdf_text;
print(urdf_text(True))" > so101.urdf`` in the workspace). It imports the URDF as a fixed-base
articulation with the importer's default position drives, sets their gains, runs physics at 200 Hz
without a ground plane (so the gripper never touches a floor), and builds this OmniGraph, evaluated
once per physics step (an on-demand graph ticked by On Physics Step), so commands are applied and
states and /clock published at the 200 Hz physics rate, not at the rendering frame rate:

    On Physics Step ─┬─> ROS2 Publish Joint State  (isaac_joint_states)  <─ Isaac Read Simulation Time
                     ├─> ROS2 Subscribe Joint State (isaac_joint_command) ─> Articulation Controller
                     └─> ROS2 Publish Clock         (clock)               <─ Isaac Read Simulation Time

Then press play (or pass ``--play``). Consumers use ``use_sim_time`` and the same ``ROS_DOMAIN_ID``.

Pacing: a standalone Isaac Sim app runs its main loop as fast as it can (``isaacsim.exp.base.kit``, 5.0
and 5.1: ``runLoops.main.rateLimitEnabled = false``, ``manualModeEnabled = true``: each frame advances a
fixed 1/60 s whatever it took), so a light headless scene runs many times faster than real time and
every millisecond the replay's commands spend in DDS becomes several milliseconds of command lag in
simulation time. The script turns the main loop's rate limit on at ``--frame-hz`` frames per second of
the wall clock, each advancing 1/frame-hz s of simulation time (PHYSICS_HZ / frame-hz physics steps),
the settings ``isaacsim.core.api``'s ``SimulationContext.set_simulation_dt`` writes when rate limiting is on:
simulation time never runs ahead of the wall clock, and falls behind it only when a frame takes longer.

Drive gains are given per radian (N·m/rad, N·m·s/rad, like every gain in the workspace). USD angular
drives store stiffness and damping per degree, so they are written as gain × π/180, the conversion
Isaac Sim's own ``Articulation.set_gains`` applies (isaacsim.core.prims). The force limit is a torque
(N·m) and is written as given.

Isaac imports live inside the functions below, so this file imports without Isaac Sim: the checks are
plain functions, and ``src/so101_sim2real/test/test_isaac_bridge.py`` runs the import and graph code
against a recording fake of the Isaac Sim modules built from the upstream node definitions.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SUPPORTED_VERSIONS",
    "PHYSICS_HZ",
    "FRAME_HZ",
    "GRAPH_PATH",
    "ROS2_BRIDGE_EXTENSION",
    "URDF_IMPORTER_EXTENSION",
    "DriveGains",
    "BridgeSetupError",
    "parse_args",
    "isaac_version",
    "check_ros_environment",
    "usd_angular_gains",
    "enable_extensions",
    "physics_steps_per_frame",
    "pace_to_real_time",
    "build_physics_scene",
    "import_robot",
    "set_drive_gains",
    "build_bridge_graph",
    "main",
]

# 5.0 and 5.1 (checked against the IsaacSim v5.0.0 and v5.1.0 sources). Older releases do not bundle the
# ROS 2 Jazzy bridge libraries (isaacsim.ros2.bridge added Jazzy in 4.3.0, 2025-03, on the Kit 107 line of
# 5.0); 6.0 keeps the node type ids but removed the URDFParseAndImportFile command (its URDF importer is the
# URDFImporter class of a new USD-exchange backend).
SUPPORTED_VERSIONS = ((5, 0), (5, 1))
UNSUPPORTED_REASON = ("releases before 5.0 do not bundle the ROS 2 Jazzy bridge libraries; 6.0 removed the "
                      "URDFParseAndImportFile command the import uses")
PHYSICS_HZ = 200.0  # SAGE's sim rate; the workspace's MuJoCo backend uses the same
FRAME_HZ = 50.0  # default main-loop frames per wall-clock second: 4 physics steps per frame
MAIN_LOOP = "/app/runLoops/main"  # the settings of omni.kit.loop-isaac's main run loop
GRAPH_PATH = "/World/SO101_ROS2_Bridge"
ROS2_BRIDGE_EXTENSION = "isaacsim.ros2.bridge"
URDF_IMPORTER_EXTENSION = "isaacsim.asset.importer.urdf"
ROS_DISTRO = "jazzy"  # the workspace is ROS 2 Jazzy
RMW_IMPLEMENTATION = "rmw_fastrtps_cpp"  # the workspace's side runs Fast DDS


class BridgeSetupError(RuntimeError):
    """A setup step failed; the message is the one line the user sees."""


@dataclass(frozen=True)
class DriveGains:
    kp: float  # N·m/rad
    kd: float  # N·m·s/rad
    max_force: float  # N·m


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--urdf", required=True, help="SO-101 URDF with absolute mesh paths")
    parser.add_argument("--kp", type=float, default=1000.0, help="drive stiffness, N·m/rad (SAGE's repository: 1000)")
    parser.add_argument("--kd", type=float, default=2.0, help="drive damping, N·m·s/rad")
    parser.add_argument("--max-force", type=float, default=3.35, help="drive force limit, N·m (official servo figure)")
    parser.add_argument("--command-topic", default="isaac_joint_command")
    parser.add_argument("--state-topic", default="isaac_joint_states")
    parser.add_argument("--frame-hz", type=float, default=FRAME_HZ,
                        help=f"main-loop frames per wall-clock second, each advancing 1/frame-hz s of simulation "
                             f"time (a divisor of the {PHYSICS_HZ:g} Hz physics rate)")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--play", action="store_true", help="start the timeline at once")
    return parser.parse_args(argv)


def isaac_version(environ: Mapping[str, str]) -> tuple[int, int]:
    """(major, minor) of the running Isaac Sim, from ``$ISAAC_PATH/VERSION`` (python.sh sets ISAAC_PATH).

    Raises :class:`BridgeSetupError` when it cannot be read or is not one of :data:`SUPPORTED_VERSIONS`.
    """
    supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_VERSIONS)
    root = environ.get("ISAAC_PATH")
    if not root:
        raise BridgeSetupError("ISAAC_PATH is not set: run this script with Isaac Sim's ./python.sh "
                               f"(Isaac Sim {supported})")
    version_file = Path(root) / "VERSION"
    try:
        text = version_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BridgeSetupError(f"{version_file}: cannot read the Isaac Sim version ({exc.strerror})") from exc
    parts = text.split("-", 1)[0].split(".")
    try:
        version = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        raise BridgeSetupError(f"{version_file}: unrecognised Isaac Sim version {text!r}") from None
    if version not in SUPPORTED_VERSIONS:
        raise BridgeSetupError(f"Isaac Sim {text} is not supported by this script (supported: {supported}; "
                               f"{UNSUPPORTED_REASON})")
    return version


def check_ros_environment(environ: Mapping[str, str], isaac_root: str) -> None:
    """The ROS 2 bridge disables itself without these; they must be set before Isaac Sim starts."""
    bundled = f"{isaac_root}/exts/{ROS2_BRIDGE_EXTENSION}/{ROS_DISTRO}/lib"
    fix = (f"export ROS_DISTRO={ROS_DISTRO} RMW_IMPLEMENTATION={RMW_IMPLEMENTATION} "
           f"LD_LIBRARY_PATH=$LD_LIBRARY_PATH:{bundled} before ./python.sh")
    if environ.get("ROS_DISTRO") != ROS_DISTRO:
        raise BridgeSetupError(f"ROS_DISTRO is {environ.get('ROS_DISTRO')!r}, the workspace needs {ROS_DISTRO!r}: {fix}")
    if environ.get("RMW_IMPLEMENTATION") != RMW_IMPLEMENTATION:
        raise BridgeSetupError(f"RMW_IMPLEMENTATION is {environ.get('RMW_IMPLEMENTATION')!r}, "
                               f"the workspace needs {RMW_IMPLEMENTATION!r}: {fix}")
    library_dirs = [entry.rstrip("/") for entry in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if entry]
    if not any(entry.endswith(f"{ROS_DISTRO}/lib") for entry in library_dirs):
        raise BridgeSetupError(f"LD_LIBRARY_PATH has no ROS 2 {ROS_DISTRO} library folder (the bridge's bundled "
                               f"{bundled} or /opt/ros/{ROS_DISTRO}/lib): {fix}")


def usd_angular_gains(gains: DriveGains) -> tuple[float, float]:
    """(stiffness, damping) as USD angular drives store them: per degree, i.e. per-radian gain × π/180."""
    per_degree = math.pi / 180.0
    return gains.kp * per_degree, gains.kd * per_degree


def enable_extensions(app: Any, isaac_root: str) -> None:
    """Enable the URDF importer and the ROS 2 bridge; raise if the bridge did not come up."""
    import omni.kit.app
    from isaacsim.core.utils.extensions import enable_extension

    manager = omni.kit.app.get_app().get_extension_manager()
    for name in (URDF_IMPORTER_EXTENSION, ROS2_BRIDGE_EXTENSION):
        enable_extension(name)
        # The bridge checks its environment in on_startup and disables itself (deferred) when the ROS 2
        # libraries cannot be loaded: let that happen before asking whether it is still enabled.
        app.update()
        if not manager.is_extension_enabled(name):
            hint = ""
            if name == ROS2_BRIDGE_EXTENSION:
                hint = (f": check ROS_DISTRO={ROS_DISTRO}, RMW_IMPLEMENTATION={RMW_IMPLEMENTATION} and "
                        f"LD_LIBRARY_PATH (…:{isaac_root}/exts/{name}/{ROS_DISTRO}/lib) were exported before "
                        "./python.sh, and read the bridge's messages above")
            raise BridgeSetupError(f"enabling the Isaac Sim extension {name} failed{hint}")


def physics_steps_per_frame(frame_hz: float) -> int:
    """Physics steps in one main-loop frame of 1/``frame_hz`` s; raises unless ``frame_hz`` divides PHYSICS_HZ."""
    steps = PHYSICS_HZ / frame_hz if frame_hz > 0 else 0.0
    if steps < 1 or abs(steps - round(steps)) > 1e-9:
        divisors = [f"{PHYSICS_HZ / n:g}" for n in range(1, 9) if PHYSICS_HZ % n == 0]
        raise BridgeSetupError(f"--frame-hz {frame_hz:g} does not divide the {PHYSICS_HZ:g} Hz physics rate "
                               f"(e.g. {', '.join(divisors)})")
    return round(steps)


def pace_to_real_time(frame_hz: float) -> None:
    """Rate-limit the main loop to ``frame_hz`` wall-clock frames per second of 1/``frame_hz`` s of simulation
    time each (Isaac Sim's standalone default is no rate limit: the loop runs as fast as it can)."""
    import carb.settings
    import omni.kit.loop._loop as omni_loop

    settings = carb.settings.get_settings()
    settings.set_bool(f"{MAIN_LOOP}/rateLimitEnabled", True)
    settings.set_float(f"{MAIN_LOOP}/rateLimitFrequency", float(frame_hz))
    loop = omni_loop.acquire_loop_interface()
    loop.set_manual_step_size(1.0 / frame_hz)  # the simulation time one frame advances (manual mode)
    loop.set_manual_mode(True)


def build_physics_scene(stage: Any) -> None:
    """Physics scene at :data:`PHYSICS_HZ`, gravity along −z (the USD default); deliberately no ground plane."""
    from pxr import PhysxSchema, Sdf, UsdLux, UsdPhysics

    scene = UsdPhysics.Scene.Define(stage, Sdf.Path("/World/physicsScene"))
    PhysxSchema.PhysxSceneAPI.Apply(scene.GetPrim()).CreateTimeStepsPerSecondAttr(int(PHYSICS_HZ))
    UsdLux.DistantLight.Define(stage, Sdf.Path("/World/light"))


def import_robot(urdf_path: str) -> str:
    """Import the URDF (fixed base, fixed joints kept); returns the articulation root's prim path.

    The drive type is left at the importer's default, position (``UrdfJointTargetType.JOINT_DRIVE_POSITION``):
    the binding is a pybind11 enum that rejects ints.
    """
    import omni.kit.commands

    created, config = omni.kit.commands.execute("URDFCreateImportConfig")
    if not created:
        raise BridgeSetupError("URDFCreateImportConfig failed: is the URDF importer extension enabled?")
    config.fix_base = True
    config.merge_fixed_joints = False
    config.make_default_prim = False
    imported, robot_path = omni.kit.commands.execute("URDFParseAndImportFile", urdf_path=urdf_path,
                                                     import_config=config, dest_path="", get_articulation_root=True)
    if not imported or not robot_path:
        raise BridgeSetupError(f"{urdf_path}: the URDF import failed (see Isaac Sim's messages above)")
    return str(robot_path)


def set_drive_gains(stage: Any, gains: DriveGains) -> int:
    """Write the gains into every revolute joint's angular drive; returns how many joints were set."""
    from pxr import UsdPhysics

    stiffness, damping = usd_angular_gains(gains)
    count = 0
    for prim in stage.Traverse():
        if prim.IsA(UsdPhysics.RevoluteJoint):
            drive = UsdPhysics.DriveAPI.Apply(prim, "angular")
            drive.CreateStiffnessAttr(stiffness)
            drive.CreateDampingAttr(damping)
            drive.CreateMaxForceAttr(gains.max_force)
            count += 1
    if count == 0:
        raise BridgeSetupError("the imported robot has no revolute joints to drive")
    return count


def build_bridge_graph(robot_path: str, command_topic: str, state_topic: str) -> None:
    """The OmniGraph of the module docstring, evaluated on every physics step."""
    import omni.graph.core as og

    try:
        _edit_bridge_graph(og, robot_path, command_topic, state_topic)
    except Exception as exc:  # OmniGraph's own error types; Isaac's ROS 2 samples catch the same way
        cause = " ".join(str(exc).split())
        raise BridgeSetupError(f"building the OmniGraph {GRAPH_PATH} failed: {cause} (a ROS 2 bridge that started "
                               "without its libraries registers no ROS2 nodes: see Isaac Sim's messages above)") from exc


def _edit_bridge_graph(og: Any, robot_path: str, command_topic: str, state_topic: str) -> None:
    keys = og.Controller.Keys
    og.Controller.edit(
        # On Physics Step only fires in an on-demand graph (OgnOnPhysicsStep logs an error otherwise).
        {"graph_path": GRAPH_PATH, "evaluator_name": "execution",
         "pipeline_stage": og.GraphPipelineStage.GRAPH_PIPELINE_STAGE_ONDEMAND},
        {
            keys.CREATE_NODES: [
                ("physics_step", "isaacsim.core.nodes.OnPhysicsStep"),
                ("sim_time", "isaacsim.core.nodes.IsaacReadSimulationTime"),
                ("publish_state", "isaacsim.ros2.bridge.ROS2PublishJointState"),
                ("subscribe_command", "isaacsim.ros2.bridge.ROS2SubscribeJointState"),
                ("controller", "isaacsim.core.nodes.IsaacArticulationController"),
                ("publish_clock", "isaacsim.ros2.bridge.ROS2PublishClock"),
            ],
            keys.CONNECT: [
                ("physics_step.outputs:step", "publish_state.inputs:execIn"),
                ("physics_step.outputs:step", "subscribe_command.inputs:execIn"),
                ("physics_step.outputs:step", "publish_clock.inputs:execIn"),
                ("physics_step.outputs:step", "controller.inputs:execIn"),
                ("sim_time.outputs:simulationTime", "publish_state.inputs:timeStamp"),
                ("sim_time.outputs:simulationTime", "publish_clock.inputs:timeStamp"),
                ("subscribe_command.outputs:jointNames", "controller.inputs:jointNames"),
                ("subscribe_command.outputs:positionCommand", "controller.inputs:positionCommand"),
            ],
            keys.SET_VALUES: [
                ("publish_state.inputs:topicName", state_topic),
                ("publish_state.inputs:targetPrim", robot_path),
                ("subscribe_command.inputs:topicName", command_topic),
                ("controller.inputs:robotPath", robot_path),
            ],
        },
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    gains = DriveGains(args.kp, args.kd, args.max_force)
    try:
        physics_steps_per_frame(args.frame_hz)
        if not Path(args.urdf).is_file():
            raise BridgeSetupError(f"{args.urdf}: no such URDF file")
        isaac_version(os.environ)
        isaac_root = os.environ["ISAAC_PATH"]
        check_ros_environment(os.environ, isaac_root)
    except BridgeSetupError as exc:
        sys.exit(f"so101_isaac_bridge: {exc}")

    from isaacsim import SimulationApp  # Isaac Sim's Python only

    app = SimulationApp({"headless": args.headless})
    try:
        pace_to_real_time(args.frame_hz)
        enable_extensions(app, isaac_root)
        import omni.timeline
        import omni.usd

        stage = omni.usd.get_context().get_stage()
        build_physics_scene(stage)
        robot_path = import_robot(args.urdf)
        set_drive_gains(stage, gains)
        build_bridge_graph(robot_path, args.command_topic, args.state_topic)
    except BridgeSetupError as exc:
        app.close()
        sys.exit(f"so101_isaac_bridge: {exc}")
    if args.play:
        omni.timeline.get_timeline_interface().play()
    while app.is_running():
        app.update()
    app.close()


if __name__ == "__main__":
    main()
