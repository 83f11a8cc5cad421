"""run_node: a fatal error while building the node is one line and exit code 1; a callback interrupted by the
shutdown ends the node quietly; other errors propagate."""

from __future__ import annotations

import pytest

from so101_ros.node_runner import run_node


class BadParameter(ValueError):
    pass


def _refuse() -> None:
    raise BadParameter("rate_hz must be positive, got -1")


def test_fatal_error_is_one_line_and_exit_code_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_node(_refuse, [], "some_node", fatal=(BadParameter,)) == 1
    assert capsys.readouterr().err == "some_node: error: rate_hz must be positive, got -1\n"


def test_an_unexpected_error_keeps_its_traceback() -> None:
    with pytest.raises(BadParameter):
        run_node(_refuse, [], "some_node")


class Publishing:
    """A node whose timer publishes; Ctrl-C's shutdown lands while the callback runs."""

    def __init__(self) -> None:
        from rclpy.node import Node
        from std_msgs.msg import Empty

        self.node = Node("publishing")
        self.publisher = self.node.create_publisher(Empty, "ticks", 10)
        self.message = Empty()

    def destroy_node(self) -> None:
        self.node.destroy_node()


def _shutdown_under_a_publish(node: Publishing) -> None:
    import rclpy

    rclpy.shutdown()  # what rclpy's SIGINT handler does
    node.publisher.publish(node.message)  # the callback that was running: its context is gone


def test_a_callback_interrupted_by_the_shutdown_ends_the_node_quietly() -> None:
    with pytest.raises(Exception, match="context is invalid"):  # rclpy's RCLError  # what the node hits (the traceback of make demo)
        _check_publish_after_shutdown()
    assert run_node(Publishing, [], "publishing", spin=_shutdown_under_a_publish) == 0


def _check_publish_after_shutdown() -> None:
    import rclpy

    rclpy.init()
    node = Publishing()
    try:
        _shutdown_under_a_publish(node)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def test_a_callback_that_a_ctrl_c_broke_ends_the_node_quietly() -> None:
    """A Ctrl-C that lands inside a call into rclpy's C++ comes out as pybind11's RuntimeError, the interrupt
    swallowed, and rclpy still ok: its traceback reached the demo's console at the end of an episode."""
    import os
    import signal

    from so101_common.waiting import wait_for

    def broken_by_ctrl_c(_node: Publishing) -> None:
        try:
            os.kill(os.getpid(), signal.SIGINT)  # the parent stopping its child nodes
            wait_for(lambda: False, timeout=5.0)
        except KeyboardInterrupt:  # what pybind11 does with it while converting a call's arguments
            raise RuntimeError("Unable to convert call argument '0' to Python object") from None
        raise AssertionError("no Ctrl-C within 5 s")

    assert run_node(Publishing, [], "publishing", spin=broken_by_ctrl_c) == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was


def test_an_error_while_running_keeps_its_traceback() -> None:
    def broken(_node: Publishing) -> None:
        raise BadParameter("a callback failed")

    with pytest.raises(BadParameter):
        run_node(Publishing, [], "publishing", spin=broken)
