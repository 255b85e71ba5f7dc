"""MAML's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig

__all__ = ["MAMLConfig"]


class MAMLConfig(ActorCriticConfig):
    """Model-agnostic meta-learning for RL (Finn, Abbeel & Levine 2017, Algorithm 3), with
    RLlib 1.x's outer objective: PPO's clipped surrogate on the adapted policy's rollouts,
    differentiated through the inner policy-gradient step(s)."""

    algo: Literal["maml"] = "maml"
    lr: float = Field(1e-3, gt=0.0, description="Outer (meta) Adam learning rate, beta.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor.")
    gae_lambda: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda.")
    inner_lr: float = Field(
        0.1, gt=0.0, le=100.0, description="Inner (adaptation) SGD step size, alpha."
    )
    inner_adaptation_steps: int = Field(
        1,
        ge=1,
        le=10,
        description=(
            "Inner SGD steps per task; each on fresh rollouts of the policy adapted so far."
        ),
    )
    maml_optimizer_steps: int = Field(
        5, ge=1, le=100, description="Outer Adam steps per meta-batch (on the same rollouts)."
    )
    grad_clip: float | None = Field(
        None,
        gt=0.0,
        description=(
            "Max global L2 norm of the outer gradient; None (RLlib's MAML default) disables "
            "clipping, which would otherwise be set by the value loss's much larger gradient."
        ),
    )
    clip_param: float = Field(0.3, gt=0.0, description="Outer surrogate clip range epsilon.")
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    normalize_advantages: bool = Field(
        True,
        description=(
            "Standardise the advantages over each task's batch (the inner and the outer "
            "loss alike), so that inner_lr does not depend on the reward scale."
        ),
    )

    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "meta_learning"})
    dataset_columns: ClassVar[tuple[str, ...] | None] = (
        "action_logp",
        "action_dist_inputs",
        "advantages",
        "value_targets",
    )
    learns_from: ClassVar[str] = (
        "whole fresh rollout fragments of one task per worker (GAE computed when sampled), "
        "the pre- and post-adaptation fragments of each task together"
    )
