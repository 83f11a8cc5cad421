"""``so101 preflight``: the deployment checklist, run by the machine, before the first policy runs.

ROS-free checks (:mod:`.report`, :mod:`.bus_checks`, :mod:`.gravity`, :mod:`.motion_plan`,
:mod:`.chain_checks`, :mod:`.thresholds`) and the ROS part that drives the arm through the deploy chain
(:mod:`.node`, :mod:`.flow`); ``so101_apps.preflight_cli`` is the command line.
"""
