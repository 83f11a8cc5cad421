"""The per-joint step: braking speed and the bounded step toward a target."""

from __future__ import annotations

import math

import pytest

from so101_safety.limiter import braking_speed, limit_step


@pytest.mark.parametrize("d, dt, a", [(1.0, 0.01, 20.0), (1e-6, 0.01, 20.0), (3.0, 0.0, 5.0), (0.5, 10.0, 1.0)])
def test_braking_speed_solves_its_equation(d, dt, a):
    v = braking_speed(d, dt, a)
    assert v > 0
    assert v * v / (2 * a) + v * dt == pytest.approx(d, rel=1e-9)


def test_braking_speed_is_zero_at_or_past_the_limit():
    assert braking_speed(0.0, 0.01, 20.0) == 0.0
    assert braking_speed(-1.0, 0.01, 20.0) == 0.0
    assert braking_speed(math.nan, 0.01, 20.0) == 0.0


def _run(target, steps=400, dt=0.01, y=0.0, v=0.0, lower=-2.0, upper=2.0, vmax=3.0, amax=20.0):
    ys, vs = [y], [v]
    for _ in range(steps):
        y, v = limit_step(y, v, target, dt, lower, upper, vmax, amax)
        ys.append(y)
        vs.append(v)
    return ys, vs


def test_reaches_the_target_exactly_without_overshoot_within_bounds():
    ys, vs = _run(1.5)
    assert ys[-1] == 1.5 and vs[-1] == 0.0
    assert max(ys) <= 1.5
    assert max(abs(v) for v in vs) <= 3.0 + 1e-12
    assert max(abs(b - a) for a, b in zip(vs, vs[1:], strict=False)) <= 20.0 * 0.01 + 1e-9


def test_brakes_before_a_position_limit_when_moving_fast():
    # moving at full speed 0.05 rad below the limit with a target beyond it: the limit is never crossed
    ys, vs = _run(2.0, y=1.95, v=3.0, upper=2.0, amax=1e3)
    assert max(ys) <= 2.0
    ys, vs = _run(2.0, y=1.5, v=0.1, upper=2.0)
    assert max(ys) <= 2.0 and ys[-1] == 2.0


def test_a_long_gap_moves_no_further_than_the_capped_step():
    y, v = limit_step(0.0, 0.0, 1.0, 1e6, -2.0, 2.0, 3.0, 20.0)
    assert 0.0 < y <= 1.0
    assert v == pytest.approx(y / 1e6)
