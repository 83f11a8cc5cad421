"""Per-joint rate limiting: one output step that respects position, velocity and acceleration bounds.

Pure scalar functions (six joints do not pay for numpy's per-call overhead).

The step from ``(y_prev, v_prev)`` over ``dt`` picks a velocity ``v`` inside three intervals and
moves ``y = y_prev + v·h`` (``h`` is ``dt`` capped, see below):

- acceleration: ``|v − v_prev| ≤ a·h``;
- velocity: ``|v| ≤ v_max``;
- braking: ``v²/(2a) + v·h ≤ d`` toward each position limit at distance ``d``, so the joint can always
  stop before the limit with the acceleration it is allowed.

If the previous step kept ``v_prev²/(2a) ≤ d`` (true at rest), the three intervals always intersect
(for ``u = v_prev − a·h``: ``u²/(2a) + u·h = v_prev²/(2a) − a·h²/2 ≤ d``), and the new step keeps the
braking condition, so by induction the bounds never conflict and the output never needs a hard clip
at a limit. Inside them it tracks the target as fast as allowed without overshooting it (the same
braking rule with the distance to the target).

``h = min(dt, max(1 s, 2·v_max/a))``: after a long gap the step moves no further than after ``h``
(stricter, never looser), and the velocity handed to the next step is the real ``Δy/dt``; the
acceleration bound still holds with the real ``dt`` because ``|Δv| ≤ 2·v_max ≤ a·dt`` there.
"""

from __future__ import annotations

import math

__all__ = ["braking_speed", "limit_step", "MIN_DT"]

MIN_DT = 1e-6
"""Steps closer than this (s) do not advance the output (also guards the divisions by ``dt``)."""

_SNAP = 1e-9  # rad: a target closer than this is taken as reached (no endless geometric approach)


def braking_speed(distance: float, dt: float, max_acceleration: float) -> float:
    """The largest ``v ≥ 0`` with ``v²/(2a) + v·dt ≤ distance`` (0 when ``distance ≤ 0``).

    Moving at ``v`` for this step and braking at ``a`` afterwards (with any later step sizes) then
    covers at most ``distance``. Written in the cancellation-free form of the quadratic's root.
    """
    if not distance > 0:
        return 0.0
    a = max_acceleration
    return 2.0 * a * distance / (a * dt + math.sqrt((a * dt) ** 2 + 2.0 * a * distance))


def limit_step(y_prev: float, v_prev: float, target: float, dt: float, lower: float, upper: float,
               max_velocity: float, max_acceleration: float) -> tuple[float, float]:
    """One bounded step toward ``target``; returns ``(y, v)`` with ``v = (y − y_prev)/dt``.

    Preconditions (the filter keeps them): ``dt ≥ MIN_DT``, ``lower ≤ y_prev ≤ upper``,
    ``|v_prev| ≤ max_velocity`` and ``target`` within ``[lower, upper]``.
    """
    a, vmax = max_acceleration, max_velocity
    h = min(dt, max(1.0, 2.0 * vmax / a))
    error = target - y_prev
    low = max(v_prev - a * h, -vmax, -braking_speed(y_prev - lower, h, a))
    high = min(v_prev + a * h, vmax, braking_speed(upper - y_prev, h, a))
    if abs(error) <= _SNAP and low * h <= error <= high * h:
        y = target
    else:
        speed = min(vmax, braking_speed(abs(error), h, a))
        v = min(max(math.copysign(speed, error), low), high)
        y = min(max(y_prev + v * h, lower), upper)
    return y, (y - y_prev) / dt
