"""IMPALA: actor-critic with V-trace (Espeholt et al. 2018).

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"impala"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.impala.config import IMPALAConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["IMPALAConfig"]

register_algorithm(
    "impala",
    config=IMPALAConfig,
    policy="plangraph.algorithms.impala.policy:IMPALAPolicy",
    builtin=True,
)
