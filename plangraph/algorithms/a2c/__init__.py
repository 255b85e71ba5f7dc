"""Advantage actor-critic (Mnih et al. 2016), synchronous.

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"a2c"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.a2c.config import A2CConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["A2CConfig"]

register_algorithm(
    "a2c",
    config=A2CConfig,
    policy="plangraph.algorithms.a2c.policy:A2CPolicy",
    builtin=True,
)
