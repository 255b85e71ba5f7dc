"""CQL: conservative Q-learning (Kumar et al. 2020), the CQL(H) variant on top of SAC, as
RLlib's CQL. Learns from a recorded dataset (``ReadExperiences``).

``config.py``: the settings (torch-free); ``policy.py``: the learner (SAC's, through
``plangraph.algorithms.sac.policy``, plus the conservative term). Registered as
``"cql"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.cql.config import CQLConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["CQLConfig"]

register_algorithm(
    "cql",
    config=CQLConfig,
    policy="plangraph.algorithms.cql.policy:CQLPolicy",
    builtin=True,
)
