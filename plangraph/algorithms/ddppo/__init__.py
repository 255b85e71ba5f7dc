"""Decentralized distributed PPO (Wijmans et al. 2020, "DD-PPO: Learning Near-Perfect
PointGoal Navigators from 2.5 Billion Frames"; RLlib 1.x ``rllib/agents/ddppo``).

Every rollout worker samples, computes PPO's gradients on its own rows, all-reduces them
with its peers (``torch.distributed``, backend ``gloo``) and applies the same optimizer
step, so all workers keep identical weights and there is no learner in the driver.

``config.py``: the settings (torch-free); ``policy.py``: the learner (PPO's loss and GAE
postprocessing, with gradients averaged over the process group before each step);
``distributed.py``: what runs inside the rollout worker actors (joining and leaving the
process group, one round of training on a worker's own rows). Registered as ``"ddppo"``.
"""

from __future__ import annotations

from plangraph.algorithms.ddppo.config import DDPPOConfig
from plangraph.ops.algorithms import register_algorithm

__all__ = ["DDPPOConfig"]

register_algorithm(
    "ddppo",
    config=DDPPOConfig,
    policy="plangraph.algorithms.ddppo.policy:DDPPOPolicy",
    builtin=True,
)
