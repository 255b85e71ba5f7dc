"""Model-agnostic meta-learning (Finn, Abbeel & Levine 2017, Algorithm 3).

``config.py``: the settings (torch-free); ``policy.py``: the learner (the inner
policy-gradient step, the outer loss through it, the meta-update); ``adaptation.py``: what
runs inside a rollout worker (the inner adaptation on the worker's own task). Registered
as ``"maml"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.maml.config import MAMLConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["MAMLConfig"]

register_algorithm(
    "maml",
    config=MAMLConfig,
    policy="plangraph.algorithms.maml.policy:MAMLPolicy",
    builtin=True,
)
