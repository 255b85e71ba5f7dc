"""The policy factory: the torch policy class for each ``algo`` of a policy config."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from plangraph.ops.policies import PolicyConfigModel
from plangraph.rl.a2c import A2CPolicy
from plangraph.rl.appo import APPOPolicy
from plangraph.rl.dqn import DQNPolicy
from plangraph.rl.impala import IMPALAPolicy
from plangraph.rl.policy import TorchPolicy, as_policy_config
from plangraph.rl.ppo import PPOPolicy
from plangraph.rl.sac import SACPolicy

__all__ = ["POLICY_CLASSES", "make_policy"]

POLICY_CLASSES: dict[str, type[TorchPolicy[PolicyConfigModel]]] = {
    "a2c": A2CPolicy,
    "ppo": PPOPolicy,
    "dqn": DQNPolicy,
    "impala": IMPALAPolicy,
    "appo": APPOPolicy,
    "sac": SACPolicy,
}
"""Policy class by ``PolicyConfig.algo``."""


def make_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: Any,
    seed: int = 0,
    device: str = "cpu",
) -> TorchPolicy[PolicyConfigModel]:
    """Build the policy for ``config.algo``: a2c, ppo, dqn, impala, appo or sac
    (``POLICY_CLASSES``).

    Args:
        observation_space: Box observation space.
        action_space: one of the config's ``action_spaces`` (``Discrete``, ``Box``, ...).
        config: a ``PolicyConfig`` member (``A2CConfig``, ``PPOConfig``, ``DQNConfig``,
            ``IMPALAConfig``, ``APPOConfig``, ``SACConfig``) or an equivalent dict.
        seed: policy seed (see ``TorchPolicy``).
        device: the learner's device, ``"auto"``, ``"cpu"`` or ``"cuda"``
            (``plangraph.rl.policy.resolve_device``).

    Raises:
        pydantic.ValidationError: ``config`` is a dict that is not a valid policy config.
        ValueError: ``device`` is ``"cuda"`` and torch sees no GPU.
    """
    cfg = as_policy_config(config)
    return POLICY_CLASSES[cfg.algo](observation_space, action_space, cfg, seed, device)
