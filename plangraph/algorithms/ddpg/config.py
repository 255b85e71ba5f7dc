"""DDPG's settings, and the ones DDPG and TD3 share (torch-free: the compiler validates them).

Written on the public API only (``plangraph.ops``), as a user's algorithm would be.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.algorithms.dqn import per_worker_epsilon
from plangraph.ops.policies import MAX_N_STEP, AlgorithmConfig, ColumnLayout, HiddenSizes

__all__ = ["DDPGConfig", "DeterministicActorCriticConfig"]


class DeterministicActorCriticConfig(AlgorithmConfig):
    """Settings of the deterministic-policy actor-critics (DDPG, TD3): a deterministic actor
    ``mu(s)`` squashed by tanh into the bounds of a 1-D ``Box``, Q-networks with target
    copies (``UpdateTarget`` with ``tau`` < 1 keeps them as Polyak averages), Gaussian
    exploration noise on the actions, learning from replayed transitions.

    Units: ``exploration_noise`` (and TD3's target noise) are standard deviations in units
    of the action half-range ``(high - low) / 2``, per action dimension (0.1 on Pendulum's
    [-2, 2] torque: a std of 0.2); learning rates per optimizer step; ``random_timesteps``
    in env steps sampled.

    The learning rates: ``actor_lr`` and ``critic_lr`` when set, else ``lr`` (and
    ``lr_schedule``, which drives the optimizers without a fixed rate of their own).
    """

    dataset_columns: ClassVar[tuple[str, ...] | None] = ("next_obs",)
    learns_from: ClassVar[str] = "single transitions (obs, actions, rewards, next_obs)"
    capabilities: ClassVar[frozenset[str]] = frozenset({"target_network", "replay"})
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
        3e-4,
        gt=0.0,
        description="Adam learning rate of the actor and the critics, unless `actor_lr` or "
        "`critic_lr` sets theirs.",
    )
    actor_lr: float | None = Field(
        None, gt=0.0, description="Learning rate of the actor; None: `lr` (or `lr_schedule`)."
    )
    critic_lr: float | None = Field(
        None,
        gt=0.0,
        description="Learning rate of the critic(s); None: `lr` (or `lr_schedule`).",
    )
    grad_clip: float | None = Field(
        None,
        gt=0.0,
        description="Max L2 norm of each of the actor's and the critics' gradients; None "
        "disables clipping (as both papers).",
    )
    exploration_noise: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Std of the Gaussian noise added to the actor's action when exploring, "
        "in units of the action half-range (the sum is clipped to the bounds).",
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
        description="n-step Q targets: sum up to n discounted rewards within one episode "
        "and fragment, then bootstrap with gamma**k. 1 = one-step targets (both papers).",
    )
    per_worker_noise_alpha: float | None = Field(
        None,
        ge=0.0,
        description=(
            "Ape-X per-worker exploration (Horgan et al. 2018, sec. 4.1, as for DQN's "
            "epsilon): rollout worker i of N (i = 0 .. N-1) explores with noise std "
            "exploration_noise ** (1 + alpha * i / (N - 1)); one worker uses "
            "exploration_noise. None: every worker uses exploration_noise. Dimensionless."
        ),
    )

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """``next_obs``, and ``n_steps`` with n-step targets."""
        out: ColumnLayout = {"next_obs": obs}
        if self.n_step > 1:
            out["n_steps"] = ((), "int64")
        return out

    def worker_noise(self, worker: int, num_workers: int) -> float:
        """The exploration noise std of rollout worker ``worker`` (0-based) of
        ``num_workers``, in action half-ranges: ``exploration_noise``, or with
        ``per_worker_noise_alpha`` Ape-X's schedule (Horgan et al. 2018, sec. 4.1, there for
        epsilon; the same function as DQN's: ``std ** (1 + alpha * worker / (num_workers -
        1))``). As ``exploration_noise <= 1``, the first worker explores most.

        Raises:
            ValueError: ``worker`` outside ``[0, num_workers)``.
        """
        alpha = self.per_worker_noise_alpha
        if alpha is None:
            return float(self.exploration_noise)
        return per_worker_epsilon(self.exploration_noise, worker, num_workers, alpha)

    def worker_set_notes(self, num_workers: int) -> list[str]:
        """Per-worker exploration (Ape-X): each rollout worker's noise std."""
        alpha = self.per_worker_noise_alpha
        if alpha is None:
            return []
        n = num_workers
        stds = [self.worker_noise(i, n) for i in range(n)]
        shown = ", ".join(f"worker {i + 1}: {s:.3g}" for i, s in enumerate(stds[:8]))
        more = f", ... worker {n}: {stds[-1]:.3g}" if n > 8 else ""
        return [
            "exploration noise per rollout worker (Ape-X, Horgan et al. 2018):",
            f"  std_i = std ** (1 + {alpha:g} * i / (N - 1)), i = 0 .. N-1, N = {n}, "
            f"std = {self.exploration_noise:g} (action half-ranges):",
            f"  {shown}{more}",
        ]


class DDPGConfig(DeterministicActorCriticConfig):
    """DDPG (Lillicrap et al. 2016, "Continuous control with deep reinforcement learning"):
    a deterministic tanh-squashed actor, one critic Q(s, a), target actor and critic
    (``UpdateTarget`` with ``tau``), Gaussian exploration noise (instead of the paper's
    Ornstein-Uhlenbeck process, as Fujimoto et al. 2018 found it no worse).

    Defaults: the paper's learning rates (actor 1e-4, critic 1e-3), 256x256 ReLU networks
    (the paper: 400x300), gamma 0.99, no gradient clipping, no weight decay (the paper's
    1e-2 L2 on the critic: ``optimizer.weight_decay`` would apply it to both networks).
    """

    algo: Literal["ddpg"] = "ddpg"
    # Every update has both losses, so gradients can be computed and applied apart.
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "target_network", "replay"})
    actor_lr: float | None = Field(
        1e-4,
        gt=0.0,
        description="Learning rate of the actor (Lillicrap et al. 2016: 1e-4); None: `lr` "
        "(or `lr_schedule`).",
    )
    critic_lr: float | None = Field(
        1e-3,
        gt=0.0,
        description="Learning rate of the critic (Lillicrap et al. 2016: 1e-3); None: `lr` "
        "(or `lr_schedule`).",
    )
