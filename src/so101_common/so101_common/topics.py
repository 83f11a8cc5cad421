"""Topic names of the SO-101 graph: the one place they are written.

The chain's topics are relative, so a whole graph runs under a namespace (two arms on one domain:
``/arm1/joint_states``, ``/arm2/joint_states``) and every one is remappable. ``/diagnostics`` (the
aggregator's topic), ``/clock`` and the Isaac Sim bridge's topics are global by ROS convention and by
the bridge's own graph. A bag stores names as they resolved when it was recorded: :func:`absolute`
gives a relative topic's name in a bag recorded without a namespace (``/joint_states``).
"""

from __future__ import annotations

__all__ = [
    "JOINT_STATES", "JOINT_COMMAND", "POLICY_COMMAND", "POLICY_ACTION_CHUNK", "COMPENSATED_COMMAND", "LEADER_STATES",
    "TWIN_STATES", "TWIN_GAP", "TWIN_GAP_RMSE", "DIAGNOSTICS", "CLOCK", "SIM_COMMAND", "SIM_STATES", "absolute",
]

JOINT_STATES = "joint_states"  # sensor_msgs/JointState: the arm as the driver measured it
JOINT_COMMAND = "joint_command"  # sensor_msgs/JointState: the safety filter's output, what the driver is told
POLICY_COMMAND = "policy/joint_command"  # the policy's (or motion player's) command, before compensation
POLICY_ACTION_CHUNK = "policy/action_chunk"  # trajectory_msgs/JointTrajectory: the policy's upcoming commands
COMPENSATED_COMMAND = "gaponet/joint_command"  # the compensator's output: policy command + Δ
LEADER_STATES = "leader/joint_states"  # the leader arm's joint states (teleoperation)
# The live gap twin (so101_sim2real twin): MuJoCo run on the policy's commands beside the measured arm. All
# sensor_msgs/JointState, stamped with the measured joint state each sample is paired with.
TWIN_STATES = "twin/joint_states"  # the sim's position, velocity, effort (rad, rad/s, N·m)
TWIN_GAP = "twin/gap"  # position = sim − measured position (rad), velocity = sim − measured velocity (rad/s)
TWIN_GAP_RMSE = "twin/gap_rmse"  # the same two, as rolling RMSE over the twin's window (rad, rad/s)
DIAGNOSTICS = "/diagnostics"  # diagnostic_msgs/DiagnosticArray of every node
CLOCK = "/clock"  # rosgraph_msgs/Clock: simulation time
SIM_COMMAND = "/isaac_joint_command"  # the simulator bridge's command input (Isaac Sim's or the MuJoCo bridge)
SIM_STATES = "/isaac_joint_states"  # the simulator bridge's joint states


def absolute(topic: str, namespace: str = "") -> str:
    """``topic`` resolved in ``namespace`` (default: none), as a recorder stores it: ``joint_states`` →
    ``/joint_states``; ``/diagnostics`` stays as it is."""
    if topic.startswith("/"):
        return topic
    prefix = "/" + namespace.strip("/") if namespace.strip("/") else ""
    return f"{prefix}/{topic}"
