"""Test helper: record JointStates at 200 Hz into an episode bag until killed (``python recorder_crash_child.py BAG_ROOT``).

Message k carries position k on every joint and is stamped (header and bag time) with the wall clock.
Prints ``recording <bag>`` once the bag exists, then ``k <stamp_ns>`` every 20 messages.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from recorder_helpers import JOINT_STATE, joint_state

from so101_recorder.recorder import Recorder, RecorderConfig


def main() -> None:
    recorder = Recorder(RecorderConfig(root=Path(sys.argv[1]), robot_id="crash_arm", task="crash", flush_period_s=0.5))
    print("recording", recorder.start(), flush=True)
    k = 0
    while True:
        now = time.time_ns()
        recorder.write("/joint_states", JOINT_STATE, joint_state(now // 10**9, now % 10**9, position=[float(k)] * 6), now)
        recorder.tick()
        if k % 20 == 0:
            print(k, now, flush=True)
        k += 1
        time.sleep(0.005)


if __name__ == "__main__":
    main()
