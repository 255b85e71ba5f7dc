"""SAC's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import MAX_N_STEP, AlgorithmConfig, ColumnLayout, HiddenSizes

__all__ = ["SACConfig"]


class SACConfig(AlgorithmConfig):
    """Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
    Applications"): a tanh-squashed Gaussian actor, twin Q-networks with target copies
    (UpdateTarget with ``tau`` < 1 keeps them as Polyak averages) and automatic tuning of
    the entropy temperature alpha towards ``target_entropy``.

    Defaults follow the paper's (and SB3's) SAC: 256x256 ReLU networks, lr 3e-4 for the
    actor, the critics and alpha, gamma 0.99, target entropy -dim(A), no gradient clipping.
    """

    dataset_columns: ClassVar[tuple[str, ...] | None] = ("next_obs",)
    algo: Literal["sac"] = "sac"
    learns_from: ClassVar[str] = "single transitions (obs, actions, rewards, next_obs)"
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "target_network", "replay"})
    action_spaces: ClassVar[frozenset[str]] = frozenset({"Box"})
    needs_bounded_actions: ClassVar[bool] = True
    model_types: ClassVar[frozenset[str]] = frozenset({"mlp"})
    hiddens: HiddenSizes = Field(
        (256, 256),
        description="Hidden layer widths of the actor and of each Q-network when no `model` "
        "is given.",
    )
    activation: Literal["tanh", "relu"] = Field(
        "relu", description="Hidden activation when no `model` is given."
    )
    lr: float = Field(
        3e-4, gt=0.0, description="Adam learning rate of the actor, the critics and alpha."
    )
    grad_clip: float | None = Field(
        None,
        gt=0.0,
        description="Max L2 norm of each of the actor's and the critics' gradients; None "
        "disables clipping.",
    )
    initial_alpha: float = Field(
        1.0, gt=0.0, description="Entropy temperature alpha before any update."
    )
    target_entropy: float | None = Field(
        None,
        description="Entropy alpha is tuned towards, in nats per action; None: -dim(A) "
        "(Haarnoja et al. 2018, sec. 5).",
    )
    random_timesteps: int = Field(
        0,
        ge=0,
        description="Env steps sampled during which actions are drawn uniformly from the "
        "bounds instead of from the actor (exploration before learning starts).",
    )
    n_step: int = Field(
        1,
        ge=1,
        le=MAX_N_STEP,
        description="n-step soft Q targets: sum up to n discounted rewards within one "
        "episode and fragment, then bootstrap with gamma**k. 1 = one-step SAC.",
    )

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """``next_obs``, and ``n_steps`` with n-step targets."""
        out: ColumnLayout = {"next_obs": obs}
        if self.n_step > 1:
            out["n_steps"] = ((), "int64")
        return out
