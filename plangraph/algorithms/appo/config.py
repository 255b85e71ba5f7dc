"""APPO's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.algorithms.impala.config import VTraceConfig

__all__ = ["APPOConfig"]


class APPOConfig(VTraceConfig):
    """Asynchronous PPO: V-trace advantages in the PPO clipped surrogate (Schulman et al.
    2017, eq. 7) against a target ("old") network, as RLlib's APPO.

    Defaults follow RLlib's APPO (clip_param 0.4, use_kl_loss False, kl_coeff 1.0,
    kl_target 0.01) and otherwise IMPALA's.
    """

    algo: Literal["appo"] = "appo"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"gradients", "target_network", "off_policy_batches"}
    )
    clip_param: float = Field(
        0.4, gt=0.0, description="Surrogate clip range epsilon (dimensionless)."
    )
    use_kl_loss: bool = Field(
        False, description="Add kl_coeff * KL(target net || online net) to the loss."
    )
    kl_coeff: float = Field(
        1.0,
        ge=0.0,
        description=(
            "Initial weight of the KL term; adapted at every update_target() (x1.5 when the "
            "KL exceeds 2 * kl_target, x0.5 below kl_target / 2)."
        ),
    )
    kl_target: float = Field(
        0.01, gt=0.0, description="Target KL(target net || online net), in nats per row."
    )
