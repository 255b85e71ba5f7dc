"""TD3's settings (torch-free: the compiler validates them).

Written on the public API only (``plangraph.ops``, and DDPG's package for the settings the
two share), as a user's algorithm would be.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plangraph.algorithms.ddpg import DeterministicActorCriticConfig

__all__ = ["TD3Config"]


class TD3Config(DeterministicActorCriticConfig):
    """TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic
    Methods"): DDPG with clipped double Q-learning (twin critics, the min of their targets),
    delayed policy updates (the actor every ``policy_delay``-th update) and target policy
    smoothing (clipped Gaussian noise on the target action).

    Defaults follow the paper and its authors' code: 256x256 ReLU networks, lr 3e-4 for the
    actor and the critics, gamma 0.99, exploration noise 0.1, target noise 0.2 clipped to
    0.5 (both in action half-ranges), policy delay 2, no gradient clipping. Batches of 256
    and ``tau`` 0.005 are the plan's (``LocalReplay``, ``UpdateTarget``). No ``gradients``
    capability: a delayed update has no actor loss, so an update's gradients cannot always
    be laid out for every optimizer (``ComputeGradients``).
    """

    algo: Literal["td3"] = "td3"
    policy_delay: int = Field(
        2,
        ge=1,
        description="Updates per actor update: the actor steps on every policy_delay-th "
        "update only, the critics on every one (Fujimoto et al. 2018, sec. 5.2: d = 2). "
        "The plan's UpdateTarget should fire as often (every train_batch_size * "
        "policy_delay env steps trained), as in the paper.",
    )
    target_noise: float = Field(
        0.2,
        ge=0.0,
        description="Std of the Gaussian noise added to the target actor's action in the "
        "critics' targets (target policy smoothing, sec. 5.3), in action half-ranges.",
    )
    target_noise_clip: float = Field(
        0.5,
        ge=0.0,
        description="The target noise is clipped to [-c, c] before it is added, in action "
        "half-ranges (sec. 5.3: c = 0.5).",
    )
