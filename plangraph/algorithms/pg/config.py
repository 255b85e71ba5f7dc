"""PG's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig, ColumnLayout

__all__ = ["PGConfig"]


class PGConfig(ActorCriticConfig):
    """REINFORCE with a learned value baseline (Williams 1992): Monte-Carlo returns to go."""

    dataset_columns: ClassVar[tuple[str, ...] | None] = ("value_targets",)
    algo: Literal["pg"] = "pg"
    lr: float = Field(1e-3, gt=0.0, description="Learning rate (per optimizer step).")
    vf_loss_coeff: float = Field(
        0.5, ge=0.0, description="Weight of the baseline's loss, mean[(V(s) - G)^2]."
    )
    entropy_coeff: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        False,
        description="Standardise the advantages G - V(s) over each train batch before the "
        "policy term (mean 0, std 1). Off by default, as RLlib's PG: near the optimum the "
        "advantages are mostly noise, which standardising scales back up.",
    )

    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients"})
    learns_from: ClassVar[str] = (
        "whole fresh rollout fragments (discounted returns to go computed when they were "
        "sampled, bootstrapped from V only at a fragment cut or a truncation)"
    )

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """The behaviour policy's ``action_logp`` and ``action_dist_inputs`` (its
        ``compute_actions`` extras), then the returns to go postprocessing adds
        (``value_targets``, float32)."""
        return {
            "action_logp": ((), "float32"),
            "action_dist_inputs": ((dist_inputs,), "float32"),
            "value_targets": ((), "float32"),
        }
