"""Asynchronous PPO: V-trace advantages in the clipped surrogate.

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"appo"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.appo.config import APPOConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["APPOConfig"]

register_algorithm(
    "appo",
    config=APPOConfig,
    policy="plangraph.algorithms.appo.policy:APPOPolicy",
    builtin=True,
)
