"""DDPG: deep deterministic policy gradient (Lillicrap et al. 2016).

``config.py``: the settings (torch-free), with the ones TD3 shares
(``DeterministicActorCriticConfig``); ``policy.py``: the learner (loss, acting,
postprocessing), whose base TD3's learner extends. Registered as ``"ddpg"`` through the
public API, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.ddpg.config import DDPGConfig, DeterministicActorCriticConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["DDPGConfig", "DeterministicActorCriticConfig"]

register_algorithm(
    "ddpg",
    config=DDPGConfig,
    policy="plangraph.algorithms.ddpg.policy:DDPGPolicy",
    builtin=True,
)
