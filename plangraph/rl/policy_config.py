"""Validating a policy config given as a model or a dict (no torch: rollout workers use it)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from plangraph.ops.policies import DQNConfig, PolicyConfig, PolicyConfigModel, SACConfig

_CONFIG_ADAPTER: TypeAdapter[Any] = TypeAdapter(PolicyConfig)


def as_policy_config(config: Any) -> PolicyConfigModel:
    """Validate a policy config given as a model instance or a dict (``{"algo": ...}``).

    Raises:
        pydantic.ValidationError: the dict is not a valid ``PolicyConfig``.
    """
    if isinstance(config, PolicyConfigModel):
        return config
    return _CONFIG_ADAPTER.validate_python(config)


def transition_n_step(config: PolicyConfigModel) -> int:
    """The env steps one sampled transition spans: ``n_step`` of a config that has the
    setting (DQN, SAC: n-step targets), 1 for the others."""
    return config.n_step if isinstance(config, (DQNConfig, SACConfig)) else 1
