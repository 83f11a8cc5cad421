"""The parts of the READMEs that are derived from the code: each is generated from its one source, so the
documentation cannot drift from it (``make docs`` rewrites them; ``test/test_docs.py`` checks them).

A generated part sits between ``<!-- generated: NAME (make docs) -->`` and ``<!-- end of generated: NAME -->``
in its file; everything else in the READMEs is written by hand.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from so101_common.parameters import ParameterSpec, parameter_specs

__all__ = ["GENERATED", "Generated", "parameters_markdown", "commands_markdown", "launch_arguments_markdown", "render",
           "main"]

ROOT = Path(__file__).resolve().parents[3]  # the checkout (make docs runs from it)


@dataclass(frozen=True)
class Generated:
    file: str  # relative to the checkout
    name: str
    make: Callable[[], str]

    @property
    def begin(self) -> str:
        return f"<!-- generated: {self.name} (make docs) -->"

    @property
    def end(self) -> str:
        return f"<!-- end of generated: {self.name} -->"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if value is None:
        return "unset"
    return f'"{value}"' if value == "" else str(value)


def _range(spec: ParameterSpec) -> str:
    if spec.low is None and spec.high is None:
        return ""
    return f"{_value(spec.low) if spec.low is not None else '-∞'} … {_value(spec.high) if spec.high is not None else '∞'}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a ``|`` would end the cell)."""
    return text.replace("|", "\\|")


def parameters_markdown(specs: Sequence[ParameterSpec]) -> str:
    """A node's parameters as a table: name, default, range, description."""
    lines = ["| parameter | default | range | meaning |", "|---|---|---|---|"]
    lines += [f"| `{s.name}` | `{_value(s.default)}` | {_range(s)} | {_cell(s.description)} |" for s in specs]
    return "\n".join(lines)


def commands_markdown() -> str:
    """The ``so101`` commands, as the CLI's table names them."""
    from so101_apps.cli import SUBCOMMANDS

    lines = ["| command | what it does |", "|---|---|"]
    lines += [f"| `so101 {c.name}` | {_cell(c.summary)} |" for c in SUBCOMMANDS]
    return "\n".join(lines)


def _driver() -> str:
    from so101_driver.parameters import FollowerParameters

    return parameters_markdown(parameter_specs(FollowerParameters))


def _leader() -> str:
    from so101_driver.parameters import LEADER_DEFAULTS, ArmParameters

    specs = [ParameterSpec(s.name, LEADER_DEFAULTS.get(s.name, s.default), s.description, s.low, s.high, s.kind, s.element)
             for s in parameter_specs(ArmParameters)]
    return parameters_markdown(specs)


def _safety() -> str:
    from so101_safety.config import node_parameter_specs

    joint = "shoulder_pan"  # every joint has the same overrides: one is shown, as joints.<joint>.<key>
    specs = [s for s in node_parameter_specs() if not s.name.startswith("joints.") or s.name.startswith(f"joints.{joint}.")]
    return parameters_markdown([ParameterSpec(s.name.replace(f"joints.{joint}.", "joints.<joint>."), s.default,
                                              s.description, s.low, s.high, s.kind, s.element) for s in specs])


def _compensator() -> str:
    from so101_gaponet.parameters import CompensatorParameters

    return parameters_markdown(parameter_specs(CompensatorParameters))


def _policy() -> str:
    from so101_policy.parameters import PolicyParameters

    return parameters_markdown(parameter_specs(PolicyParameters))


def _motion_player() -> str:
    from so101_policy.motions import MotionPlayerParameters

    return parameters_markdown(parameter_specs(MotionPlayerParameters))


def _recorder() -> str:
    from so101_recorder.parameters import RecorderParameters

    return parameters_markdown(parameter_specs(RecorderParameters))


def launch_arguments_markdown() -> str:
    """Every graph's launch arguments (:mod:`so101_bringup.graphs`), one table per launch file."""
    from so101_bringup.graphs import GRAPHS, ShareFile

    blocks = []
    for graph in GRAPHS.values():
        lines = [f"**`{graph.name}.launch.py`**: {graph.description}", "",
                 "| argument | default | choices | meaning |", "|---|---|---|---|"]
        for arg in graph.args:
            if arg.default is None:
                default = "required"
            elif isinstance(arg.default, ShareFile):
                default = f"`{arg.default.path}` in `{arg.default.package}`'s share"
            else:
                default = f"`{_value(arg.default)}`"
            lines.append(f"| `{arg.name}` | {default} | {', '.join(arg.choices)} | {_cell(arg.description)} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _paired_dataset() -> str:
    from so101_common.paired_dataset import format_markdown

    return format_markdown()


def _gap_profile() -> str:
    from so101_virtual.profiles import schema_markdown

    return schema_markdown()


GENERATED: tuple[Generated, ...] = (
    Generated("README.md", "commands", commands_markdown),
    Generated("src/so101_common/README.md", "paired-dataset", _paired_dataset),
    Generated("src/so101_virtual/README.md", "gap-profile-schema", _gap_profile),
    Generated("src/so101_driver/README.md", "driver-parameters", _driver),
    Generated("src/so101_driver/README.md", "leader-parameters", _leader),
    Generated("src/so101_safety/README.md", "safety-parameters", _safety),
    Generated("src/so101_gaponet/README.md", "compensator-parameters", _compensator),
    Generated("src/so101_policy/README.md", "policy-parameters", _policy),
    Generated("src/so101_policy/README.md", "motion-player-parameters", _motion_player),
    Generated("src/so101_recorder/README.md", "recorder-parameters", _recorder),
    Generated("src/so101_bringup/README.md", "launch-arguments", launch_arguments_markdown),
)


def render(text: str, part: Generated) -> str:
    """``text`` with ``part``'s block replaced by what its source says now; ValueError if the markers are missing."""
    pattern = re.compile(re.escape(part.begin) + r"\n.*?" + re.escape(part.end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{part.file}: no {part.begin} … {part.end} block")
    return pattern.sub(lambda _m: f"{part.begin}\n{part.make()}\n{part.end}", text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m so101_apps.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only say which generated parts are out of date")
    args = parser.parse_args(argv)
    stale = []
    for part in GENERATED:
        path = ROOT / part.file
        text = path.read_text()
        new = render(text, part)
        if new != text:
            stale.append(f"{part.file}: {part.name}")
            if not args.check:
                path.write_text(new)
    for line in stale:
        print(("out of date: " if args.check else "rewrote: ") + line)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
