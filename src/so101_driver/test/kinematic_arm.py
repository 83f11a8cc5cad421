"""A minimal virtual SO-101 for the driver's process tests: run as a script in a child process.

    python kinematic_arm.py --link /tmp/x/arm --faults-socket /tmp/x/faults --calibration-out /tmp/x/cal.json

Six virtual STS3215 (so101_virtual's ServoMemory + BusServer + PtyLink, the real protocol) whose
joints move at a fixed speed toward Goal_Position while torque is on: enough to check that commands
reach the arm and states come back, without the MuJoCo physics. Faults are set through the
FaultControlServer socket. Writes a LeRobot calibration that matches its mechanics, then serves
until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import threading

from so101_description.joints import JOINTS
from so101_driver.calibration import MotorCalibration, save_calibration
from so101_driver.control_table import Register
from so101_virtual.bus_server import BusServer, BusTiming
from so101_virtual.faults import FaultControlServer, FaultInjector
from so101_virtual.pty_link import PtyLink
from so101_virtual.servo_memory import ServoMemory

SPEED = 3000.0  # steps/s
RANGE = (1024, 3072)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--link", required=True)
    parser.add_argument("--faults-socket", required=True)
    parser.add_argument("--calibration-out", required=True)
    args = parser.parse_args()

    servos = {j.servo_id: ServoMemory(j.servo_id, overrides={Register.Return_Delay_Time: 0}) for j in JOINTS}
    actual = {i: 2048.0 for i in servos}
    for memory in servos.values():
        memory.set_encoder(2048)
        memory.set(Register.Min_Position_Limit, RANGE[0])
        memory.set(Register.Max_Position_Limit, RANGE[1])
    save_calibration(args.calibration_out, {j.name: MotorCalibration(j.servo_id, 0, 0, *RANGE) for j in JOINTS})

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    faults = FaultInjector()
    with PtyLink(BusServer(servos, faults, BusTiming.fast()), args.link), \
            FaultControlServer(faults, args.faults_socket):
        print("ready", flush=True)
        dt = 0.005
        while not stop.wait(dt):
            for i, memory in servos.items():
                velocity = 0.0
                if memory.get(Register.Torque_Enable):
                    goal = memory.get(Register.Goal_Position)
                    step = max(-SPEED * dt, min(SPEED * dt, goal - actual[i]))
                    actual[i] += step
                    velocity = step / dt
                memory.set_encoder(round(actual[i]))
                memory.set_feedback(velocity=velocity, load=0, voltage=120, temperature=30,
                                    moving=abs(velocity) > 0, status=faults.error_bits(i))


if __name__ == "__main__":
    main()
