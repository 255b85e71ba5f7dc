"""DQN's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.ops.policies import MAX_N_STEP, AlgorithmConfig, ColumnLayout

__all__ = ["DQNConfig", "per_worker_epsilon"]


class DQNConfig(AlgorithmConfig):
    """DQN (Mnih et al. 2015) with double-Q targets (van Hasselt et al. 2016) and Huber loss."""

    dataset_columns: ClassVar[tuple[str, ...] | None] = ("next_obs",)
    algo: Literal["dqn"] = "dqn"
    learns_from: ClassVar[str] = "single transitions (obs, actions, rewards, next_obs)"
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "target_network", "replay"})
    activation: Literal["tanh", "relu"] = Field("relu", description="Hidden activation.")
    lr: float = Field(5e-4, gt=0.0, description="Adam learning rate (per optimizer step).")
    grad_clip: float | None = Field(
        10.0, gt=0.0, description="Max global L2 norm of the gradient; None disables clipping."
    )
    double_q: bool = Field(True, description="Select next actions with the online net.")
    huber_delta: float = Field(1.0, gt=0.0, description="Huber loss threshold.")
    epsilon_initial: float = Field(1.0, ge=0.0, le=1.0, description="Initial exploration eps.")
    epsilon_final: float = Field(0.02, ge=0.0, le=1.0, description="Final exploration eps.")
    epsilon_timesteps: int = Field(
        10_000, ge=0, description="Env steps sampled over which eps anneals linearly."
    )
    n_step: int = Field(
        1,
        ge=1,
        le=MAX_N_STEP,
        description=(
            "n-step Q-learning targets (Sutton & Barto 2018, sec. 7.1; Hessel et al. 2018): "
            "sum up to n discounted rewards within one episode and fragment, then bootstrap "
            "with gamma**k from the state k <= n steps later. 1 = one-step DQN."
        ),
    )
    per_worker_epsilon_alpha: float | None = Field(
        None,
        ge=0.0,
        description=(
            "Ape-X per-worker exploration (Horgan et al. 2018, sec. 4.1): rollout worker i "
            "of N (i = 0 .. N-1) acts with epsilon_i = epsilon ** (1 + alpha * i / (N - 1)), "
            "epsilon the annealed schedule above (Ape-X: epsilon 0.4 constant, i.e. "
            "epsilon_timesteps 0 and epsilon_final 0.4, alpha 7); one worker uses epsilon. "
            "None: every worker uses epsilon. Dimensionless."
        ),
    )

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """``next_obs``, and ``n_steps`` with n-step targets."""
        out: ColumnLayout = {"next_obs": obs}
        if self.n_step > 1:
            out["n_steps"] = ((), "int64")
        return out

    def worker_set_notes(self, num_workers: int) -> list[str]:
        """Per-worker exploration (Ape-X): each rollout worker's epsilon."""
        alpha = self.per_worker_epsilon_alpha
        if alpha is None:
            return []
        n = num_workers
        annealed = self.epsilon_timesteps > 0
        base = self.epsilon_final
        eps = [per_worker_epsilon(base, i, n, alpha) for i in range(n)]
        shown = ", ".join(f"worker {i + 1}: {e:.3g}" for i, e in enumerate(eps[:8]))
        more = f", ... worker {n}: {eps[-1]:.3g}" if n > 8 else ""
        when = (
            f"reached after annealing from {self.epsilon_initial:g} over "
            f"{self.epsilon_timesteps:,} env steps"
            if annealed
            else "constant"
        )
        return [
            "exploration per rollout worker (Ape-X, Horgan et al. 2018):",
            f"  epsilon_i = epsilon ** (1 + {alpha:g} * i / (N - 1)), i = 0 .. N-1, N = {n}",
            f"  epsilon = {base:g} ({when}):",
            f"  {shown}{more}",
        ]


def per_worker_epsilon(epsilon: float, worker: int, num_workers: int, alpha: float) -> float:
    """Ape-X's exploration epsilon of rollout worker ``worker`` (0-based) of
    ``num_workers`` (Horgan et al. 2018, sec. 4.1):
    ``epsilon ** (1 + alpha * worker / (num_workers - 1))``; ``epsilon`` for one worker.

    Raises:
        ValueError: ``worker`` outside ``[0, num_workers)``.
    """
    if not 0 <= worker < num_workers:
        raise ValueError(f"worker {worker} is not one of the {num_workers} rollout workers")
    if num_workers == 1:
        return float(epsilon)
    return float(epsilon ** (1.0 + alpha * worker / (num_workers - 1)))
