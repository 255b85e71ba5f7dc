"""PPO's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig

__all__ = ["PPOConfig"]


class PPOConfig(ActorCriticConfig):
    """Proximal policy optimisation with the clipped surrogate (Schulman et al. 2017, eq. 7)."""

    dataset_columns: ClassVar[tuple[str, ...] | None] = (
        "action_logp",
        "action_dist_inputs",
        "vf_preds",
        "advantages",
        "value_targets",
    )
    algo: Literal["ppo"] = "ppo"
    recurrent_models: ClassVar[bool] = True
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "kl_penalty"})
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda.")
    clip_param: float = Field(0.2, gt=0.0, description="Surrogate clip range epsilon.")
    vf_clip_param: float | None = Field(
        None, gt=0.0, description="Clip range for the value update; None disables it."
    )
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        True, description="Standardise advantages per minibatch before the loss."
    )
    kl_coeff: float = Field(
        0.0,
        ge=0.0,
        le=1e6,
        description=(
            "Initial weight of the KL penalty kl_coeff * KL(pi_old || pi) in the loss (0: no "
            "penalty, the clipped surrogate alone); the UpdateKL operator adapts it."
        ),
    )
    kl_target: float = Field(
        0.01,
        gt=0.0,
        le=1e6,
        description=(
            "Target mean KL per training step: UpdateKL multiplies kl_coeff by 1.5 above "
            "2 * kl_target and by 0.5 below kl_target / 2 (nats)."
        ),
    )
