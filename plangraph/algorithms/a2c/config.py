"""A2C's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig

__all__ = ["A2CConfig"]


class A2CConfig(ActorCriticConfig):
    """Advantage actor-critic (Mnih et al. 2016, synchronous): one optimizer step per batch."""

    dataset_columns: ClassVar[tuple[str, ...] | None] = ("advantages", "value_targets")
    algo: Literal["a2c"] = "a2c"
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate (per optimizer step).")
    gae_lambda: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda (1.0 = MC returns).")
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.01, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        False, description="Standardise advantages per train batch before the loss."
    )
