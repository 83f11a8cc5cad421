"""SO-101 in Isaac Sim behind the ROS 2 bridge topics the workspace replays against.

Run with Isaac Sim's own Python (not the workspace venv), ROS 2 Jazzy bridge enabled::

    ./python.sh so101_isaac_bridge.py --urdf /path/to/so101.urdf [--kp 1000 --kd 2 --headless]

(the URDF with absolute mesh paths: ``python -c "from so101_description.paths import urdf_text;
print(urdf_text(True))" > so101.urdf`` in the workspace). It imports the URDF as a fixed-base
articulation, sets position drives on every joint, runs physics at 200 Hz without a ground plane
(so the gripper never touches a floor), and builds this OmniGraph:

    On Playback Tick ─┬─> ROS2 Publish Joint State  (isaac_joint_states)  <─ Read Simulation Time
                      ├─> ROS2 Subscribe Joint State (isaac_joint_command) ─> Articulation Controller
                      └─> ROS2 Publish Clock         (clock)               <─ Read Simulation Time

Then press play (or pass ``--play``). Consumers use ``use_sim_time``. Isaac imports and the
simulation app live inside :func:`main`: this file can be read and linted without Isaac Sim.
Drive gains: Isaac's angular drives take stiffness per degree in some versions; this script sets them
through the USD DriveAPI in the units the running version reports, so check them in the property panel.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = ["parse_args", "main"]

PHYSICS_HZ = 200.0  # SAGE's sim rate; the workspace's MuJoCo backend uses the same
GRAPH_PATH = "/World/SO101_ROS2_Bridge"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urdf", required=True, help="SO-101 URDF with absolute mesh paths")
    parser.add_argument("--kp", type=float, default=1000.0, help="drive stiffness, N·m/rad (SAGE's repository: 1000)")
    parser.add_argument("--kd", type=float, default=2.0, help="drive damping, N·m·s/rad")
    parser.add_argument("--max-force", type=float, default=3.35, help="drive force limit, N·m (official servo figure)")
    parser.add_argument("--command-topic", default="isaac_joint_command")
    parser.add_argument("--state-topic", default="isaac_joint_states")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--play", action="store_true", help="start the timeline at once")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    from isaacsim import SimulationApp  # Isaac Sim's Python only

    app = SimulationApp({"headless": args.headless})
    import omni.graph.core as og
    import omni.kit.commands
    import omni.timeline
    import omni.usd
    from isaacsim.core.utils.extensions import enable_extension
    from pxr import PhysxSchema, Sdf, UsdLux, UsdPhysics

    enable_extension("isaacsim.ros2.bridge")
    app.update()
    stage = omni.usd.get_context().get_stage()

    # Physics scene at 200 Hz, gravity along −z; deliberately no ground plane.
    scene = UsdPhysics.Scene.Define(stage, Sdf.Path("/World/physicsScene"))
    PhysxSchema.PhysxSceneAPI.Apply(scene.GetPrim()).CreateTimeStepsPerSecondAttr(PHYSICS_HZ)
    UsdLux.DistantLight.Define(stage, Sdf.Path("/World/light"))

    # URDF import: fixed base, position drives; stiffness/damping set per joint below.
    _, config = omni.kit.commands.execute("URDFCreateImportConfig")
    config.fix_base = True
    config.merge_fixed_joints = False
    config.make_default_prim = False
    config.default_drive_type = 1  # position
    _, robot_path = omni.kit.commands.execute("URDFParseAndImportFile", urdf_path=args.urdf, import_config=config,
                                              dest_path="", get_articulation_root=True)
    for prim in stage.Traverse():
        if prim.IsA(UsdPhysics.RevoluteJoint):
            drive = UsdPhysics.DriveAPI.Apply(prim, "angular")
            drive.CreateStiffnessAttr(args.kp)
            drive.CreateDampingAttr(args.kd)
            drive.CreateMaxForceAttr(args.max_force)

    keys = og.Controller.Keys
    og.Controller.edit(
        {"graph_path": GRAPH_PATH, "evaluator_name": "execution"},
        {
            keys.CREATE_NODES: [
                ("tick", "omni.graph.action.OnPlaybackTick"),
                ("sim_time", "isaacsim.core.nodes.IsaacReadSimulationTime"),
                ("publish_state", "isaacsim.ros2.bridge.ROS2PublishJointState"),
                ("subscribe_command", "isaacsim.ros2.bridge.ROS2SubscribeJointState"),
                ("controller", "isaacsim.core.nodes.IsaacArticulationController"),
                ("publish_clock", "isaacsim.ros2.bridge.ROS2PublishClock"),
            ],
            keys.CONNECT: [
                ("tick.outputs:tick", "publish_state.inputs:execIn"),
                ("tick.outputs:tick", "subscribe_command.inputs:execIn"),
                ("tick.outputs:tick", "publish_clock.inputs:execIn"),
                ("tick.outputs:tick", "controller.inputs:execIn"),
                ("sim_time.outputs:simulationTime", "publish_state.inputs:timeStamp"),
                ("sim_time.outputs:simulationTime", "publish_clock.inputs:timeStamp"),
                ("subscribe_command.outputs:jointNames", "controller.inputs:jointNames"),
                ("subscribe_command.outputs:positionCommand", "controller.inputs:positionCommand"),
            ],
            keys.SET_VALUES: [
                ("publish_state.inputs:topicName", args.state_topic),
                ("publish_state.inputs:targetPrim", robot_path),
                ("subscribe_command.inputs:topicName", args.command_topic),
                ("controller.inputs:robotPath", robot_path),
            ],
        },
    )
    if args.play:
        omni.timeline.get_timeline_interface().play()
    while app.is_running():
        app.update()
    app.close()


if __name__ == "__main__":
    main()
