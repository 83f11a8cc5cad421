"""Sim-delta model (ASAP's delta action) learned from real SO-101 recordings.

``Δ(s, a)`` such that MuJoCo driven with ``a + Δ`` reproduces what the real arm did for command
``a``. Modules: :mod:`.recordings` (real runs and the held-out rule), :mod:`.features` (the model's
input layout, shared by training and replay), :mod:`.targets` (inverse-dynamics Δ targets),
:mod:`.filter` (the replay's command filter), :mod:`.rollout` (closed-loop MuJoCo rollouts and
their comparison with the real arm), :mod:`.trainer` (supervised fit + DAgger), :mod:`.cli`
(``so101 train-sim-delta``).
"""

__all__ = ["SIM_DELTA_KINDS"]

# The sim-delta architectures (GapONet's DeepONet, a Transformer, the shipped per-joint MLP, and the
# per-joint linear baseline); the compensator's other kinds (so101_gaponet.models.NETWORK_KINDS) are not
# trained here. Defined here, without torch, for the command line's choices.
SIM_DELTA_KINDS = ("mlp", "deeponet", "transformer", "linear")
