"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al. 2018).

``config.py``: the settings (torch-free; the ones shared with DDPG come from
``plangraph.algorithms.ddpg``); ``policy.py``: the learner, on DDPG's. Registered as
``"td3"`` through the public API, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.td3.config import TD3Config
from plangraph.ops.algorithms import register_algorithm

__all__ = ["TD3Config"]

register_algorithm(
    "td3",
    config=TD3Config,
    policy="plangraph.algorithms.td3.policy:TD3Policy",
    builtin=True,
)
