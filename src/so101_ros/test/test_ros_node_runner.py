"""run_node: a fatal error while building the node is one line and exit code 1; others propagate."""

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
