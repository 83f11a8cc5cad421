"""Bad input to any ``so101`` command: exit status 1, one line on stderr naming the problem, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from so101_apps.cli import SUBCOMMANDS, Subcommand, command_parser
from so101_apps.cli import main as so101

BAD_INPUTS = [
    (["virtual-bus", "--profile", "nosuch"], "unknown gap profile 'nosuch'"),
    (["pair", "--real", "{tmp}/missing", "--sim", "mujoco", "--out", "{tmp}/paired"], "does not exist"),
    (["analyze", "{tmp}/missing"], "is not a paired dataset"),
    (["replay", "--motion", "{tmp}/missing.txt", "--out", "{tmp}/replayed"], "cannot read motion file"),
    (["record", "--recover", "{tmp}/missing_bag"], "cannot read bag"),
    (["export-lerobot", "--bags", "{tmp}/missing_bag", "--root", "{tmp}/exported"], "cannot read bag"),
    (["train-gaponet", "--dataset", "{tmp}/missing", "--out", "{tmp}/model.onnx"], "is not a paired dataset"),
    (["scan", "--port", "{tmp}/no_such_port"], "cannot open"),
    (["calibrate", "--port", "{tmp}/no_such_port", "--robot-id", "x", "--out", "{tmp}/cal.json"], "cannot open"),
    (["fit-profile", "--bag", "{tmp}/missing_bag", "--out", "{tmp}/p.yaml"], "cannot read bag"),
    (["fleet", "report", "{tmp}/missing_dataset", "--out", "{tmp}/report"], "no episode summaries"),
]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=[c.name for c in SUBCOMMANDS])
def test_every_command_s_help_renders(command: Subcommand) -> None:
    """``so101 demo --help`` ended in a ValueError: a help text's ``%`` is a format character to argparse."""
    _module, parser = command_parser(command)
    assert parser.format_help().startswith(f"usage: so101 {command.name}")


def _one_error_line(err: str, expected: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], err
    assert lines[0].startswith(f"{lines[0].split(':')[0]}: error: ") and lines[0].startswith("so101 "), err
    assert "Traceback" not in err


@pytest.mark.parametrize(("argv", "expected"), BAD_INPUTS, ids=[argv[0] for argv, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_1(argv, expected, tmp_path, capfd):
    assert so101([a.format(tmp=tmp_path) for a in argv]) == 1
    _one_error_line(capfd.readouterr().err, expected)


def test_a_child_process_error_reaches_the_console_as_its_one_line(tmp_path):
    """``so101 demo`` starts the virtual arm as a child: its message, not the parent's traceback (here it cannot
    write the arm's calibration: a folder holds the file's name)."""
    (tmp_path / "run" / "compensated" / "virtual_arm" / "virtual_follower.json").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "so101_apps.cli", "demo", "--single", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    _one_error_line(done.stderr, "so101 demo: error: the virtual SO-101 could not write its calibration: so101 "
                                 "virtual-bus: error: [Errno 21] Is a directory")
    assert done.stderr.count("so101 -v for the traceback") == 1


@pytest.mark.parametrize("argv", [["run-motion", "--profile", "defualt"], ["demo", "--single", "--profile", "defualt"],
                                  ["run-motion", "--compensator", "{tmp}/missing.onnx"]],
                         ids=["run-motion profile", "demo profile", "run-motion model"])
def test_a_misspelled_profile_or_a_missing_model_is_refused_before_anything_is_written(argv, tmp_path, capfd):
    out = tmp_path / "run"
    assert so101([a.format(tmp=tmp_path) for a in argv] + ["--motion", "wave", "--out", str(out)]) == 1
    err = capfd.readouterr().err
    expected = "model file" if "--compensator" in argv else "unknown gap profile 'defualt' (did you mean 'default'?)"
    _one_error_line(err, expected)
    assert not out.exists()


@pytest.mark.parametrize(("argv", "expected"), [
    (["train-compensator", "--episodes", "0"], "argument --episodes: must be at least 1, got 0"),  # trained on 4
    (["record", "--duration", "-1"], "argument --duration: must be a positive number, got -1"),  # left an empty bag
    (["run-motion", "--duration", "-3"], "argument --duration: must be a number ≥ 0, got -3"),
    (["demo", "--excitation-seconds", "nan"], "argument --excitation-seconds: must be a positive number, got nan"),
    (["fit-profile", "--holdout-every", "-1"], "argument --holdout-every: must be 0 or more, got -1"),
    (["fit-profile", "--iterations", "0"], "argument --iterations: must be at least 1, got 0"),
], ids=["train-compensator", "record", "run-motion", "demo", "fit-profile holdout", "fit-profile iterations"])
def test_an_unusable_count_or_duration_is_refused_while_parsing(argv, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        so101([*argv, "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"so101 {argv[0]}: error: {expected}"
    assert not (tmp_path / "out").exists()


def test_a_missing_bag_is_named_once(tmp_path, capfd):
    assert so101(["replay", "--bag", str(tmp_path / "missing"), "--out", str(tmp_path / "replayed")]) == 1
    err = capfd.readouterr().err
    _one_error_line(err, f"so101 replay: error: cannot read bag {tmp_path / 'missing'}: no such file or directory")
    assert err.count("cannot read bag") == 1
