"""IMPALA's settings, and the V-trace settings APPO shares (torch-free)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig, ColumnLayout

__all__ = ["IMPALAConfig", "VTraceConfig"]


class VTraceConfig(ActorCriticConfig):
    """Shared settings of the V-trace learners (Espeholt et al. 2018, eq. 1 and sec. 4.2)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "off_policy_batches"})
    dataset_columns: ClassVar[tuple[str, ...] | None] = ("action_logp", "next_obs", "segment_ends")
    learns_from: ClassVar[str] = (
        "whole trajectory segments in sampling order (V-trace runs along each segment and "
        "bootstraps at its end)"
    )

    lr: float = Field(5e-4, gt=0.0, description="Adam learning rate (per optimizer step).")
    grad_clip: float | None = Field(
        40.0, gt=0.0, description="Max global L2 norm of the gradient; None disables clipping."
    )
    vtrace_clip_rho_threshold: float | None = Field(
        1.0,
        gt=0.0,
        description=(
            "rho_bar: clip of the importance weight pi/mu in the V-trace TD errors (eq. 1); "
            "None = no clipping. Dimensionless."
        ),
    )
    vtrace_clip_pg_rho_threshold: float | None = Field(
        1.0,
        gt=0.0,
        description=(
            "Clip of the importance weight pi/mu in the policy-gradient advantage (sec. 4.2); "
            "None = no clipping. Dimensionless."
        ),
    )
    vtrace_clip_c_threshold: float | None = Field(
        1.0,
        gt=0.0,
        description=(
            "c_bar: clip of the trace coefficients c_i = min(c_bar, pi/mu) (eq. 1); None = no "
            "clipping. Dimensionless."
        ),
    )
    vf_loss_coeff: float = Field(
        0.5, ge=0.0, description="Weight of the value loss 0.5 * (v_s - V(x_s))^2."
    )
    entropy_coeff: float = Field(0.01, ge=0.0, description="Weight of the entropy bonus.")

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """The behaviour policy's ``action_logp`` and ``action_dist_inputs``, and the
        segment structure V-trace runs along: ``next_obs``, ``segment_ends``,
        ``policy_version``."""
        return {
            "action_logp": ((), "float32"),
            "action_dist_inputs": ((dist_inputs,), "float32"),
            "next_obs": obs,
            "segment_ends": ((), "bool"),
            "policy_version": ((), "int64"),
        }


class IMPALAConfig(VTraceConfig):
    """IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

    Defaults follow RLlib's IMPALA (lr 5e-4, grad_clip 40, vf_loss_coeff 0.5,
    entropy_coeff 0.01, rho_bar = c_bar = 1).
    """

    algo: Literal["impala"] = "impala"
