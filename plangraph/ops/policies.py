"""Policy (algorithm) settings carried by a plan's ``WorkerSet`` resource.

Pure pydantic: the compiler validates them without importing torch; ``plangraph.rl`` reads
them (``make_policy(obs_space, action_space, config)``) when a plan is built.

One model per algorithm, discriminated on ``algo``. Units: learning rates per optimizer
step; ``*_timesteps`` and schedule points in env steps sampled (``num_env_steps_sampled``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _PolicyBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hiddens: tuple[int, ...] = Field(
        (64, 64), description="Hidden layer widths of each MLP (policy and value nets)."
    )
    activation: Literal["tanh", "relu"] = Field("tanh", description="Hidden activation.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor.")
    lr: float = Field(3e-4, gt=0.0, description="Adam learning rate (per optimizer step).")
    lr_schedule: tuple[tuple[int, float], ...] | None = Field(
        None,
        description=(
            "Piecewise-linear learning rate as (env_steps_sampled, lr) points, sorted by "
            "env steps; held constant after the last point. Overrides `lr` when set."
        ),
    )
    grad_clip: float | None = Field(
        0.5, gt=0.0, description="Max global L2 norm of the gradient; None disables clipping."
    )


class A2CConfig(_PolicyBase):
    """Advantage actor-critic (Mnih et al. 2016, synchronous): one optimizer step per batch."""

    algo: Literal["a2c"] = "a2c"
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate (per optimizer step).")
    gae_lambda: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda (1.0 = MC returns).")
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.01, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        False, description="Standardise advantages per train batch before the loss."
    )


class PPOConfig(_PolicyBase):
    """Proximal policy optimisation with the clipped surrogate (Schulman et al. 2017, eq. 7)."""

    algo: Literal["ppo"] = "ppo"
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda.")
    clip_param: float = Field(0.2, gt=0.0, description="Surrogate clip range epsilon.")
    vf_clip_param: float | None = Field(
        None, gt=0.0, description="Clip range for the value update; None disables it."
    )
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.0, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        True, description="Standardise advantages per minibatch before the loss."
    )


class DQNConfig(_PolicyBase):
    """DQN (Mnih et al. 2015) with double-Q targets (van Hasselt et al. 2016) and Huber loss."""

    algo: Literal["dqn"] = "dqn"
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
        description=(
            "n-step Q-learning targets (Sutton & Barto 2018, sec. 7.1; Hessel et al. 2018): "
            "sum up to n discounted rewards within one episode and fragment, then bootstrap "
            "with gamma**k from the state k <= n steps later. 1 = one-step DQN."
        ),
    )


PolicyConfig = Annotated[A2CConfig | PPOConfig | DQNConfig, Field(discriminator="algo")]
