"""BC: behaviour cloning, MARWIL (Wang et al. 2018) with ``beta = 0``, as RLlib's BC.

Registered as ``"bc"`` on the public registry; the learner is MARWIL's
(``plangraph.algorithms.bc.policy.BCPolicy``), reading ``obs`` and ``actions`` only.
"""

from __future__ import annotations

from plangraph.algorithms.bc.config import BCConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["BCConfig"]

register_algorithm(
    "bc",
    config=BCConfig,
    policy="plangraph.algorithms.bc.policy:BCPolicy",
    builtin=True,
)
