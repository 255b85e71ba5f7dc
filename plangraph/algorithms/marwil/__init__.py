"""MARWIL: Monotonic Advantage Re-Weighted Imitation Learning (Wang et al. 2018), as
RLlib's MARWIL; ``beta = 0`` is behaviour cloning (``plangraph.algorithms.bc``).

``config.py``: the settings (torch-free); ``policy.py``: the learner. Registered as
``"marwil"`` on the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.marwil.config import MARWILConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["MARWILConfig"]

register_algorithm(
    "marwil",
    config=MARWILConfig,
    policy="plangraph.algorithms.marwil.policy:MARWILPolicy",
    builtin=True,
)
