"""The READMEs' generated parts (:mod:`so101_apps.docs`) are in place and current: a part that is missing or stale
fails here, naming its file; ``make docs`` rewrites them from the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from so101_apps.docs import GENERATED, Generated, render

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("part", GENERATED, ids=lambda part: f"{part.file}:{part.name}")
def test_every_generated_part_is_in_place_and_current(part: Generated) -> None:
    text = (ROOT / part.file).read_text()
    assert part.begin in text and part.end in text, (
        f"{part.file} lacks the markers {part.begin} … {part.end}: place them, then run make docs")
    assert render(text, part) == text, f"{part.file}: the generated part {part.name!r} is out of date: run make docs"


def test_a_stale_part_is_rewritten_and_the_text_around_it_kept() -> None:
    part = Generated("README.md", "example", lambda: "| key |\n|---|")
    stale = f"before\n{part.begin}\n| old key |\n{part.end}\nafter\n"
    assert render(stale, part) == f"before\n{part.begin}\n| key |\n|---|\n{part.end}\nafter\n"


def test_a_file_without_the_markers_is_an_error() -> None:
    part = Generated("README.md", "example", lambda: "| key |")
    with pytest.raises(ValueError, match="no <!-- generated: example"):
        render("a README without the block\n", part)
