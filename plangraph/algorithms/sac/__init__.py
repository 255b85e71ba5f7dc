"""Soft actor-critic (Haarnoja et al. 2018).

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"sac"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.sac.config import SACConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["SACConfig"]

register_algorithm(
    "sac",
    config=SACConfig,
    policy="plangraph.algorithms.sac.policy:SACPolicy",
    builtin=True,
)
