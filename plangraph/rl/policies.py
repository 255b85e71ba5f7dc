"""The policy factory: the learner class the algorithm registry names for a config."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from plangraph.ops.algorithms import algorithm, as_policy_config
from plangraph.ops.policies import AlgorithmConfig
from plangraph.rl.policy import TorchPolicy

__all__ = ["make_policy", "policy_class"]


def policy_class(config: AlgorithmConfig) -> type[TorchPolicy[AlgorithmConfig]]:
    """The learner class registered for ``config.algo`` (``register_algorithm``).

    Raises:
        TypeError: the registered ``policy`` is not a ``TorchPolicy`` subclass whose
            ``config_type`` is the config's class.
    """
    spec = algorithm(config.algo)
    cls = spec.policy_class()
    if not (isinstance(cls, type) and issubclass(cls, TorchPolicy)):
        raise TypeError(
            f"algorithm {config.algo!r}: its registered policy {cls!r} is not a subclass of "
            "plangraph.rl.TorchPolicy"
        )
    if getattr(cls, "config_type", None) is not spec.config:
        raise TypeError(
            f"algorithm {config.algo!r}: {cls.__name__}.config_type must be "
            f"{spec.config.__name__}, the config registered with it"
        )
    return cls


def make_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: Any,
    seed: int = 0,
    device: str = "cpu",
) -> TorchPolicy[AlgorithmConfig]:
    """Build the learner of ``config.algo`` (any registered algorithm: ``policy_class``).

    Args:
        observation_space: Box observation space.
        action_space: one of the config's ``action_spaces`` (``Discrete``, ``Box``, ...).
        config: a registered algorithm's config model (``PPOConfig``, ...) or an
            equivalent dict ``{"algo": ..., ...}``.
        seed: policy seed (see ``TorchPolicy``).
        device: the learner's device, ``"auto"``, ``"cpu"`` or ``"cuda"``
            (``plangraph.rl.policy.resolve_device``).

    Raises:
        pydantic.ValidationError: ``config`` is a dict that is not a valid policy config.
        TypeError: the registered policy class does not fit the config (``policy_class``).
        ValueError: ``device`` is ``"cuda"`` and torch sees no GPU.
    """
    cfg = as_policy_config(config)
    return policy_class(cfg)(observation_space, action_space, cfg, seed, device)
