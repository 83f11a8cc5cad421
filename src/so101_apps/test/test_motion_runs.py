"""A session's console lines and bag bookkeeping, without ROS."""

from __future__ import annotations

from so101_apps.motion_runs import BusFigures, ServoFaultStop, rate_line, table_header, table_row
from so101_common.paired_dataset import FaultSpan


def _bus_entry(achieved: float, capacity: float, retries: float = 0.0, timeouts: float = 0.0) -> dict[str, str]:
    """The driver's bus entry values as so101_driver publishes them (so101_driver.health.rate_values + capacity)."""
    return {"configured_rate_hz": "100", "achieved_rate_hz": f"{achieved:.1f}", "cycle_capacity_hz": f"{capacity:.1f}",
            "retries_per_s": f"{retries:.2f}", "timeouts_per_s": f"{timeouts:.2f}", "corrupt_packets_per_s": "0.00"}


def test_rate_line_warns_only_below_nine_tenths_of_the_driver_rate() -> None:
    assert "WARNING" not in rate_line("bags/x", 95.0, 100.0)
    warned = rate_line("bags/x", 71.0, 100.0)
    assert "joint states at 71 Hz (driver: 100 Hz)" in warned and "71% of the driver's rate" in warned


def test_a_slow_bus_is_named_as_the_limit_not_the_machine() -> None:
    # what the driver measured on the virtual arm with a 12 ms adapter latency: 14.3 ms per cycle, ~58 Hz achieved
    bus = BusFigures.of([_bus_entry(57.0, 70.1), _bus_entry(59.0, 69.8), _bus_entry(58.0, 70.0)])
    assert bus == BusFigures(58.0, 70.0, 0.0)
    line = rate_line("bags/x", 58.0, 100.0, bus, load_average=0.6, cores=2)
    assert "limited by the bus round-trip: one read of the servos takes 14.3 ms" in line
    assert "at most 70 Hz" in line and "CPU" not in line and "overloaded" not in line


def test_a_starved_driver_is_named_as_the_cpu() -> None:
    bus = BusFigures.of([_bus_entry(62.0, 480.0)])
    line = rate_line("bags/x", 61.0, 100.0, bus, load_average=5.3, cores=2)
    assert "limited by the CPU: a bus cycle takes 2.1 ms" in line and "driver ran at 62 Hz" in line
    assert "load average 5.3 on 2 cores" in line and "round-trip" not in line


def test_a_driver_at_its_rate_with_late_joint_states_points_at_the_processes_after_it() -> None:
    line = rate_line("bags/x", 70.0, 100.0, BusFigures.of([_bus_entry(99.0, 480.0)]), load_average=4.0, cores=2)
    assert "the driver cycled at 99 Hz but its joint states reached the recording at 70 Hz" in line


def test_bus_faults_are_named_before_the_rate() -> None:
    line = rate_line("bags/x", 60.0, 100.0, BusFigures.of([_bus_entry(60.0, 300.0, retries=4.0, timeouts=2.0)]), 0.5, 2)
    assert "limited by the bus: 6.0 retries and timeouts per second" in line


def test_without_the_driver_s_figures_the_line_says_so() -> None:
    assert BusFigures.of([{"achieved_rate_hz": "n/a"}]) is None
    assert "the driver reported no bus figures (load average 1.0 on 2 cores)" in rate_line("bags/x", 50.0, 100.0, None, 1.0, 2)


def test_table_row_lines_up_with_its_header() -> None:
    row = table_row(1.0, [0.1] * 6, [0.15] * 6)
    assert row.index("|") == table_header().index("|")
    assert "+0.100 (+0.050)" in row


def test_a_servo_fault_stop_says_what_to_do_about_each_kind_once() -> None:
    spans = [FaultSpan(joint="shoulder_lift", fault="overheat", start=10.9), FaultSpan(joint="elbow_flex", fault="overheat", start=11.2),
             FaultSpan(joint="gripper", fault="overload", start=3.0)]
    text = str(ServoFaultStop("excitation-3", spans, {}))
    assert text.startswith("servo fault during excitation-3 (s from its start): shoulder_lift: overheat from 10.90 s")
    assert text.count("let the servos cool") == 1 and "--excitation 2" in text
    assert "the joint is blocked or carries too much" in text
