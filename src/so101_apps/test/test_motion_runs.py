"""A session's console lines and bag bookkeeping, without ROS."""

from __future__ import annotations

from so101_apps.arm_watch import StateGap
from so101_apps.motion_runs import BusFigures, ServoFaultStop, rate_line, table_header, table_row
from so101_common.paired_dataset import FaultSpan
from so101_driver.feedback import BusCounters
from so101_driver.health import count_values
from so101_virtual.lag import LagHistogram


def _bus_entry(achieved: float, capacity: float, retries: float = 0.0, timeouts: float = 0.0) -> dict[str, str]:
    """The driver's bus entry values as so101_driver publishes them (so101_driver.health.rate_values + capacity)."""
    return {"configured_rate_hz": "100", "achieved_rate_hz": f"{achieved:.1f}", "cycle_capacity_hz": f"{capacity:.1f}",
            "retries_per_s": f"{retries:.2f}", "timeouts_per_s": f"{timeouts:.2f}", "corrupt_packets_per_s": "0.00"}


def test_rate_line_warns_only_below_nine_tenths_of_the_driver_rate() -> None:
    assert "WARNING" not in rate_line("bags/x", 95.0, 100.0)
    warned = rate_line("bags/x", 71.0, 100.0)
    assert "joint states at 71 Hz (driver: 100 Hz)" in warned and "71% of the driver's rate" in warned


def test_a_virtual_arm_whose_physics_fell_behind_wall_time_is_named_even_at_the_drivers_rate() -> None:
    # bands under 5, 5-10, 10-20, 20-40, 40-80, 80+ ms: 30 s of a recording, 12 s of it 10 ms or more behind
    lagged = LagHistogram((10.0, 8.0, 6.0, 4.0, 2.0, 0.0))
    line = rate_line("bags/x", 99.0, 100.0, physics_lag=lagged, load_average=3.1, cores=2)
    assert "WARNING: the virtual arm's physics ran 10 ms or more behind wall time for 40% of the recording" in line
    assert "(20 ms or more: 20%, 40 ms or more: 7%)" in line and "load average 3.1 on 2 cores" in line
    assert "joint states at" in line and "of the driver's rate" not in line  # the rate itself was fine
    kept_up = LagHistogram((25.0, 2.5, 1.5, 1.0, 0.0, 0.0))  # 2.5 s of 30 s: under a tenth
    assert "WARNING" not in rate_line("bags/x", 99.0, 100.0, physics_lag=kept_up)
    assert "WARNING" not in rate_line("bags/x", 99.0, 100.0, physics_lag=LagHistogram())  # no time accounted yet


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


def test_a_virtual_arm_that_answers_late_is_named_as_the_cpu_not_a_cable() -> None:
    """With a browser on the same 2-core machine the virtual arm missed replies, and the line blamed a loose cable."""
    bus = BusFigures.of([_bus_entry(70.0, 300.0, retries=3.0, timeouts=2.0)])
    line = rate_line("bags/x", 70.0, 100.0, bus, 6.5, 2, virtual_arm=True)
    assert ("limited by the bus: 5.0 retries and timeouts per second (the virtual arm's process answering late: it "
            "did not get the CPU in time (load average 6.5 on 2 cores))") in line and "cable" not in line
    assert "a loose cable" in rate_line("bags/x", 70.0, 100.0, bus, 6.5, 2)  # a real arm's bus


def test_without_the_driver_s_figures_the_line_says_so() -> None:
    assert BusFigures.of([{"achieved_rate_hz": "n/a"}]) is None
    assert "the driver reported no bus figures (load average 1.0 on 2 cores)" in rate_line("bags/x", 50.0, 100.0, None, 1.0, 2)


def _counted(missed: int, retries: int = 0, timeouts: int = 0) -> dict[str, str]:
    """A bus entry at 100 Hz with the driver's counts since it started, as so101_driver.health writes them."""
    return {**_bus_entry(100.0, 390.0), **count_values(BusCounters(retries=retries, timeouts=timeouts), missed)}


def test_bus_figures_count_what_the_driver_counted_since_its_report_before_the_recording() -> None:
    bus = BusFigures.of([_counted(40, retries=2), _counted(73, retries=2, timeouts=1)], before=_counted(7))
    assert (bus.missed_cycles, bus.bus_faults) == (66, 3)
    assert (BusFigures.of([_counted(40), _counted(73)]).missed_cycles) == 33  # without it: from the first entry


def test_a_stalled_driver_is_named_with_its_missed_cycles_and_the_goals_it_held() -> None:
    # what the demo recorded (2026-11-26): no joint state for 340 ms, the driver 33 cycles late, its bus clean
    bus = BusFigures.of([_counted(33)], before=_counted(0))
    line = rate_line("bags/x", 99.0, 100.0, bus, load_average=0.6, cores=2, gap=StateGap(0.34, 1.9))
    assert "joint states at 99 Hz" in line and "of the driver's rate" not in line  # the mean rate hides it
    assert ("WARNING: no joint state for 340 ms from 1.9 s: the driver missed 33 cycles with no bus retries or "
            "timeouts: its process did not run (the CPU or the machine, load average 0.6 on 2 cores; or a subscriber "
            "joining its joint states: Fast DDS can hold a publisher about 0.33 s then), and the servos held their last "
            "goals; the recording shows it") in line


def test_a_stall_with_bus_faults_names_the_bus() -> None:
    line = rate_line("bags/x", 98.0, 100.0, BusFigures.of([_counted(25, timeouts=12)], before=_counted(0)), 0.5, 2,
                     gap=StateGap(0.3, 4.0))
    assert "from 4.0 s: the driver missed 25 cycles and its bus had 12 retries and timeouts (a servo not" in line


def test_a_stall_after_a_driver_that_kept_its_cycle_points_at_the_processes_after_it() -> None:
    line = rate_line("bags/x", 97.0, 100.0, BusFigures.of([_counted(1)], before=_counted(0)), 3.5, 2,
                     gap=StateGap(0.2, 12.0))
    assert ("no joint state for 200 ms from 12.0 s: the driver missed only 1 cycles: its joint states did not reach "
            "the recording (the processes after it; load average 3.5 on 2 cores)") in line


def _windows(missed_per_window: list[int]) -> list[dict[str, str]]:
    """Bus entries 1 s apart (the driver's diagnostics rate) whose counts rise by these many missed cycles."""
    entries, total = [], 0
    for missed in missed_per_window:
        total += missed
        entries.append({**_counted(total), "window_s": "1.00"})
    return entries


def test_a_slow_bus_s_usual_missed_cycles_are_not_taken_for_a_stall() -> None:
    """Measured through ROS on an arm behind an 8 ms adapter (2026-11-28): the driver at 74 Hz of its 100 Hz missed
    487 cycles over the recording, and a 259 ms gap was blamed on its process not running."""
    bus = BusFigures.of(_windows([24, 25, 23, 24, 26, 24, 23, 25, 24, 24]), before=_counted(0))
    assert bus is not None and (bus.missed_cycles, bus.usual_missed_per_s, bus.stall_missed) == (242, 24.0, 2)
    line = rate_line("bags/x", 74.0, 100.0, bus, load_average=2.2, cores=2, gap=StateGap(0.259, 10.5))
    assert ("no joint state for 259 ms from 10.5 s: the driver missed only 2 cycles beyond its usual 24 a second: its "
            "joint states did not reach the recording (the processes after it; load average 2.2 on 2 cores)") in line


def test_a_stall_is_told_from_a_slow_bus_s_usual_missed_cycles() -> None:
    bus = BusFigures.of(_windows([24, 24, 23, 24, 40, 35, 25, 24]), before=_counted(0))
    assert bus is not None and bus.stall_missed == 27  # 16 + 11 over two windows
    line = rate_line("bags/x", 72.0, 100.0, bus, load_average=0.6, cores=2, gap=StateGap(0.3, 4.2))
    assert "from 4.2 s: the driver missed 27 cycles beyond its usual 24 a second with no bus retries or timeouts" in line


def test_a_gap_the_driver_sampled_through_is_put_after_the_driver() -> None:
    """The 259 ms gap above: the recorded joint states' stamps were never more than 19 ms apart (the driver sampled
    all along) while they, and the policy's commands, reached the recorder 232–266 ms apart."""
    bus = BusFigures.of(_windows([24, 25, 23, 24, 50, 24, 23, 25]), before=_counted(0))
    line = rate_line("bags/x", 74.0, 100.0, bus, load_average=2.2, cores=2, gap=StateGap(0.259, 10.5, sampled_s=0.013))
    assert ("no joint state for 259 ms from 10.5 s: the driver sampled the servos all along (the states around it "
            "13 ms apart by their stamps): its joint states were held up after it (the processes after it or the "
            "machine, load average 2.2 on 2 cores)") in line
    stalled_driver = rate_line("bags/x", 74.0, 100.0, bus, 2.2, 2, gap=StateGap(0.259, 10.5, sampled_s=0.26))
    assert "the driver missed 26 cycles beyond its usual 24 a second with no bus retries or timeouts" in stalled_driver


def test_a_gap_under_ten_driver_periods_is_no_stall() -> None:
    bus = BusFigures.of([_counted(8)], before=_counted(0))
    assert "WARNING" not in rate_line("bags/x", 99.0, 100.0, bus, 0.5, 2, gap=StateGap(0.099, 3.0))
    assert "no joint state for 100 ms" in rate_line("bags/x", 99.0, 100.0, bus, 0.5, 2, gap=StateGap(0.1, 3.0))


def test_table_row_lines_up_with_its_header() -> None:
    row = table_row(1.0, [0.1] * 6, [0.15] * 6)
    assert row.index("|") == table_header().index("|")
    assert "+0.100 (+0.050)" in row


def test_a_servo_fault_stop_says_what_to_do_about_each_kind_once() -> None:
    spans = [FaultSpan(joint="shoulder_lift", fault="overheat", start=10.9), FaultSpan(joint="elbow_flex", fault="overheat", start=11.2),
             FaultSpan(joint="gripper", fault="overload", start=3.0)]
    text = str(ServoFaultStop("excitation-3", spans, {}))
    assert text.startswith("servo fault during excitation-3 (times from its start): shoulder_lift: overheat from 10.90 s")
    assert text.count("let the servos cool") == 1 and "--excitation 2" in text
    assert "the joint is blocked or carries too much" in text
