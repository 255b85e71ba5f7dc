"""R2D2: recurrent experience replay (Kapturowski et al. 2019, ICLR).

``config.py``: the settings (torch-free); ``sequences.py``: where the replay sequences lie
in a fragment (numpy); ``policy.py``: the learner (recurrent Q-network, burn-in, value
rescaling, n-step double-Q targets, sequence priorities). Registered as ``"r2d2"`` on
the public registry, as a user's algorithm is.
"""

from __future__ import annotations

from plangraph.algorithms.r2d2.config import R2D2Config
from plangraph.ops.algorithms import register_algorithm

__all__ = ["R2D2Config"]

register_algorithm(
    "r2d2",
    config=R2D2Config,
    policy="plangraph.algorithms.r2d2.policy:R2D2Policy",
    builtin=True,
)
