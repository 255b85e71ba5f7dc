"""DQN with double-Q and n-step targets (Mnih et al. 2015; van Hasselt et al. 2016).

``config.py``: the settings (torch-free); ``policy.py``: the learner (loss, acting,
postprocessing). Registered as ``"dqn"`` on the public registry, as a user's algorithm is.
``per_worker_epsilon`` is Ape-X's per-worker exploration schedule (DDPG's per-worker noise
uses it too).
"""

from __future__ import annotations

from plangraph.algorithms.dqn.config import DQNConfig, per_worker_epsilon
from plangraph.ops.algorithms import register_algorithm

__all__ = ["DQNConfig", "per_worker_epsilon"]

register_algorithm(
    "dqn",
    config=DQNConfig,
    policy="plangraph.algorithms.dqn.policy:DQNPolicy",
    builtin=True,
)
