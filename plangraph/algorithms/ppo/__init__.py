"""Proximal policy optimisation, clipped surrogate (Schulman et al. 2017).

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"ppo"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.ppo.config import PPOConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["PPOConfig"]

register_algorithm(
    "ppo",
    config=PPOConfig,
    policy="plangraph.algorithms.ppo.policy:PPOPolicy",
    builtin=True,
)
