"""MARWIL's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import ActorCriticConfig, ColumnLayout

__all__ = ["MARWILConfig"]


class MARWILConfig(ActorCriticConfig):
    """Monotonic Advantage Re-Weighted Imitation Learning (Wang et al. 2018): imitate the
    recorded actions, each weighted by ``exp(beta * A / c)``; ``beta = 0`` is behaviour
    cloning. Learns from recorded experience (``ReadExperiences``), whose ``returns``
    column (discounted return to go, with this ``gamma``) the reader adds."""

    dataset_columns: ClassVar[tuple[str, ...] | None] = ()
    algo: Literal["marwil"] = "marwil"
    lr: float = Field(1e-3, gt=0.0, description="Learning rate (per optimizer step).")
    beta: float = Field(
        1.0,
        ge=0.0,
        description="Advantage weight exponent beta (Wang et al. 2018, eq. 4); 0: behaviour "
        "cloning (the value head is then not trained).",
    )
    vf_coeff: float = Field(1.0, ge=0.0, description="Weight of the value head's loss.")
    moving_average_sqd_adv_norm_start: float = Field(
        100.0, gt=0.0, description="Initial c^2, the moving average of squared advantages."
    )
    moving_average_sqd_adv_norm_update_rate: float = Field(
        1e-8,
        gt=0.0,
        le=1.0,
        description="Step size of c^2's moving average per train batch (RLlib's default).",
    )
    max_weight: float = Field(
        20.0, gt=0.0, description="Upper clip of the weights exp(beta * A / c)."
    )

    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients"})
    learns_from: ClassVar[str] = (
        "recorded experience (ReadExperiences), rows with the discounted return to go of "
        "their episode"
    )

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """The behaviour policy's ``action_logp`` and ``action_dist_inputs`` (its
        ``compute_actions`` extras) and, when sampled online, the fragment's ``returns``
        to go (float32)."""
        return {
            "action_logp": ((), "float32"),
            "action_dist_inputs": ((dist_inputs,), "float32"),
            "returns": ((), "float32"),
        }
