"""CQL's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.algorithms.sac.config import SACConfig

__all__ = ["CQLConfig"]


class CQLConfig(SACConfig):
    """Conservative Q-learning (Kumar et al. 2020, "Conservative Q-Learning for Offline
    Reinforcement Learning", arXiv:2006.04779), the CQL(H) variant on top of SAC for
    continuous actions, as RLlib's CQL: each critic's SAC loss gains
    ``min_q_weight * (logsumexp_a Q(s, a) - Q(s, a_data))`` (eq. 4), the logsumexp
    estimated by importance sampling from ``num_actions`` uniform actions and as many
    from the current policy at ``s`` and at ``s'`` (appendix F); the actor is warm-started
    by behaviour cloning for its first ``bc_iters`` updates. Optional Lagrangian tuning
    of the weight (eq. 5, ``lagrangian``), off by default.

    Every SAC setting applies (defaults as SAC's); ``n_step`` is always 1: a dataset
    holds one-step transitions.
    """

    algo: Literal["cql"] = "cql"  # type: ignore[assignment]
    learns_from: ClassVar[str] = (
        "single transitions (obs, actions, rewards, next_obs), recorded (ReadExperiences) "
        "or replayed"
    )
    n_step: int = Field(
        1, ge=1, le=1, description="Always 1: a recorded dataset holds one-step transitions."
    )
    min_q_weight: float = Field(
        5.0,
        ge=0.0,
        description="Weight alpha of the conservative term (Kumar et al. 2020, eq. 4; "
        "RLlib's min_q_weight); 0: plain SAC on the data. The Lagrangian multiplies it too.",
    )
    num_actions: int = Field(
        10,
        ge=1,
        le=256,
        description="Actions sampled per state from each of: uniform in the bounds, the "
        "policy at s, the policy at s' (3 x num_actions Q-values per row in the logsumexp).",
    )
    temperature: float = Field(
        1.0,
        gt=0.0,
        description="Temperature T of the logsumexp, T * logsumexp(Q / T) (RLlib's "
        "temperature; 1: the paper's).",
    )
    bc_iters: int = Field(
        20_000,
        ge=0,
        description="Updates during which the actor's loss is behaviour cloning, "
        "alpha log pi(y~|s) - log pi(a_data|s), instead of SAC's (RLlib's bc_iters).",
    )
    lagrangian: bool = Field(
        False,
        description="Tune the conservative weight alpha' by dual gradient descent so that "
        "the Q-gap stays near lagrangian_thresh (Kumar et al. 2020, eq. 5).",
    )
    lagrangian_thresh: float = Field(
        5.0,
        description="Target tau of the Q-gap min_q_weight * (logsumexp - Q(s, a_data)) "
        "with the Lagrangian.",
    )
    initial_alpha_prime: float = Field(
        1.0, gt=0.0, description="alpha' before any update (with the Lagrangian)."
    )
