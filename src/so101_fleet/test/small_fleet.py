"""The small simulated fleet every fleet test shares (a module of its own: test folders' conftest
modules share one name across packages, so they are not imported by name)."""

from so101_fleet.simulate import FleetConfig

SMALL_FLEET = FleetConfig(arms=4, episodes=4, days=8, duration_s=3.0, seed=7)
