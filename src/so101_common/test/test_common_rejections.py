"""The shared rejection vocabulary: bounded text and throttled log lines (simulated clock)."""

from __future__ import annotations

from so101_common.rejections import DETAIL_LIMIT, LogThrottle, RejectReason, bounded, diagnostic_key


def test_bounded_text_says_how_much_was_left_out() -> None:
    assert bounded("short") == "short"
    text = bounded("x" * 100_000)
    assert len(text) < DETAIL_LIMIT + 50 and text.endswith(f"({100_000 - DETAIL_LIMIT} more characters)")


def test_a_flood_of_lines_gives_one_a_period_and_counts_the_rest() -> None:
    now = [0.0]
    throttle = LogThrottle(1.0, clock=lambda: now[0])
    admitted = []
    for k in range(1000):  # 1 kHz for one second and a bit
        now[0] = k * 0.0011
        held = throttle.admit()
        if held is not None:
            admitted.append(held)
    assert admitted == [0, 909]  # at 0 s and at 1.0005 s; the 909 in between are counted in the second
    assert LogThrottle.suffix(909) == " (909 more since the previous line)" and LogThrottle.suffix(0) == ""


def test_diagnostic_keys() -> None:
    assert diagnostic_key(RejectReason.NON_FINITE) == "rejected_non_finite"
