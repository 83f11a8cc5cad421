"""System identification of gap profiles: replay recorded commands through the virtual arm's own
physics and firmware in simulated time, measure how its state differs from the recorded one, and fit
a small set of profile parameters to make them agree (``so101 fit-profile``).

- :mod:`.recording`: :class:`Recording`, one recorded motion (command and measured state per frame);
- :mod:`.simulate`: :func:`simulate`, a recording's commands through ``ArmPhysics`` with LeRobot's
  servo settings, as the real arm received them;
- :mod:`.metrics`: command→state tracking RMSE and lag, state error against the recording;
- :mod:`.parameters`: the identified parameters, their bounds and how they write into a profile;
- :mod:`.fit`: the search (per-joint coordinate search, joints fitted in parallel);
- :mod:`.report`: the per-joint fit report (table, JSON, plot).
"""
