"""Vanilla policy gradient: REINFORCE with a learned value baseline (Williams 1992; Sutton &
Barto 2018, sec. 13.4), as RLlib's PG.

``config.py``: the settings (torch-free); ``policy.py``: the learner (Monte-Carlo returns to
go in postprocessing, the loss). Registered as ``"pg"`` on the public registry, as a
user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.pg.config import PGConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["PGConfig"]

# register_algorithm comes from plangraph.ops.algorithms, not the plangraph.ops package:
# plangraph.ops imports the built-in algorithms, so that would be an import cycle.

register_algorithm(
    "pg",
    config=PGConfig,
    policy="plangraph.algorithms.pg.policy:PGPolicy",
    builtin=True,
)
