"""DD-PPO's settings (torch-free: the compiler validates them)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from plangraph.algorithms.ppo.config import PPOConfig

__all__ = ["DDPPOConfig"]


class DDPPOConfig(PPOConfig):
    """Decentralized distributed PPO (Wijmans et al. 2020): PPO's clipped surrogate and GAE,
    trained on the rollout workers themselves, whose gradients are averaged by an
    all-reduce before every optimizer step (RLlib 1.x ``ddppo.py``).

    Each worker runs ``num_sgd_iter`` epochs over its own rows, in minibatches of
    ``sgd_minibatch_size`` rows (per worker: a step averages ``num_workers`` of them).
    """

    algo: Literal["ddppo"] = "ddppo"  # type: ignore[assignment]
    # Whole sequences per minibatch would differ in number from worker to worker, and
    # every worker must make the same number of all-reduces per round.
    recurrent_models: ClassVar[bool] = False
    capabilities: ClassVar[frozenset[str]] = PPOConfig.capabilities | {"all_reduce"}
    num_sgd_iter: int = Field(
        1, ge=1, le=10_000, description="Epochs over a worker's own rows per round."
    )
    sgd_minibatch_size: int = Field(
        0,
        ge=0,
        le=10_000_000,
        description=(
            "Rows of a worker's own minibatch (0: all its rows); one all-reduce and one "
            "optimizer step per minibatch."
        ),
    )
    process_group_timeout_s: float = Field(
        60.0,
        gt=0.0,
        le=3600.0,
        description=(
            "Seconds a worker waits in the process group (joining it, one all-reduce) "
            "before giving up: how long a round can hang on a peer that stopped answering."
        ),
    )
