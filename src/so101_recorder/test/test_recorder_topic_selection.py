"""Which wanted topics the recorder subscribes to, and the QoS it takes (``ros2 bag record``'s rule)."""

from __future__ import annotations

from so101_recorder.topic_selection import TopicSelection, matching_qos


def test_a_wanted_topic_is_subscribed_once_advertised_with_its_first_type_unless_refused() -> None:
    topics = TopicSelection(["/joint_states", "/joint_command", "/camera"])
    advertised = {"/joint_states": ["sensor_msgs/msg/JointState"], "/camera": ["acme/msg/Frame"], "/other": ["x/msg/Y"]}
    assert topics.to_subscribe(advertised) == [("/joint_states", "sensor_msgs/msg/JointState"), ("/camera", "acme/msg/Frame")]
    topics.subscribed["/joint_states"] = "sensor_msgs/msg/JointState"
    topics.refused["/camera"] = "acme/msg/Frame: unknown type"
    assert topics.to_subscribe(advertised) == [] and topics.missing() == ["/joint_command", "/camera"]
    advertised["/joint_command"] = ["sensor_msgs/msg/JointState", "std_msgs/msg/Empty"]
    assert topics.to_subscribe(advertised) == [("/joint_command", "sensor_msgs/msg/JointState")]


def test_the_subscription_is_reliable_or_latched_only_if_every_publisher_is() -> None:
    assert matching_qos([(True, True), (True, False)]) == (True, False)
    assert matching_qos([(False, True), (True, True)]) == (False, True)
    assert matching_qos([]) == (False, False)
