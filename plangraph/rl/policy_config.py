"""Validating a policy config given as a model or a dict (no torch: rollout workers use it)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from plangraph.ops.policies import PolicyConfig, PolicyConfigModel

_CONFIG_ADAPTER: TypeAdapter[Any] = TypeAdapter(PolicyConfig)


def as_policy_config(config: Any) -> PolicyConfigModel:
    """Validate a policy config given as a model instance or a dict (``{"algo": ...}``).

    Raises:
        pydantic.ValidationError: the dict is not a valid ``PolicyConfig``.
    """
    if isinstance(config, PolicyConfigModel):
        return config
    return _CONFIG_ADAPTER.validate_python(config)
