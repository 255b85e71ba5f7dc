"""Policy (algorithm) settings carried by a plan's ``WorkerSet`` resource.

Pure pydantic: the compiler validates them without importing torch; ``plangraph.rl`` reads
them (``make_policy(obs_space, action_space, config)``) when a plan is built.

One model per algorithm, discriminated on ``algo``. Units: learning rates per optimizer
step; ``*_timesteps`` and schedule points in env steps sampled (``num_env_steps_sampled``).
Every number must be finite (``allow_inf_nan=False``): NaN or Infinity is a PG141.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from plangraph.ops.models import CNNModel, MLPModel, ModelConfig, default_model

__all__ = [
    "CAPABILITIES",
    "A2CConfig",
    "DQNConfig",
    "PPOConfig",
    "PolicyConfig",
    "SACConfig",
    "Schedule",
    "check_schedule",
    "per_worker_epsilon",
]

CAPABILITIES: dict[str, str] = {
    "gradients": "computes gradients without applying them and applies given gradients "
    "(ComputeGradients, ApplyGradients; SAC steps three optimizers and has none)",
    "target_network": "keeps a target network that UpdateTarget syncs with the online one",
    "replay": "learns from single transitions sampled out of order from a replay buffer "
    "(its loss needs only obs, actions, rewards, next_obs, terminateds)",
}
"""What a policy can do, by name: the vocabulary of each config model's ``capabilities``.

Kept as data here (not read off the torch classes in ``plangraph.rl``) so the compiler
can refuse an operator the policy cannot serve without importing torch; each entry
mirrors the policy class: ``update_target()`` exists on DQN, APPO and SAC only, and only
DQN's and SAC's losses are correct on replayed rows (A2C/PPO need the advantages of whole
fresh fragments, IMPALA/APPO's V-trace whole segments in order).
"""


def check_schedule(points: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
    """Validate a piecewise-linear schedule of ``(env_steps, value)`` points.

    At least one point; env steps are >= 0 and *strictly* increasing (two points at the
    same step would be a jump whose value depends on how the interpolation breaks ties, so
    a jump is written as two close steps); values finite and >= 0 (a schedule may anneal
    to 0). Raises ``PydanticCustomError`` whose ``ctx["at"]`` (``"2/0"``: point 2, its env
    steps) points the compiler's diagnostic at the offending entry.
    """
    if not points:
        raise PydanticCustomError(
            "schedule_empty", "a schedule needs at least one [env_steps, value] point"
        )
    for i, (step, value) in enumerate(points):
        if step < 0:
            raise PydanticCustomError(
                "schedule_step",
                "env steps must be >= 0",
                {"at": f"{i}/0", "index": i, "step": step},
            )
        if i and step <= points[i - 1][0]:
            raise PydanticCustomError(
                "schedule_order",
                "env steps must increase strictly, but the point before is at {previous} "
                "(sort the points by env steps)",
                {"at": f"{i}/0", "index": i, "step": step, "previous": points[i - 1][0]},
            )
        if not math.isfinite(value) or value < 0:
            raise PydanticCustomError(
                "schedule_value",
                "the value must be a finite number >= 0",
                {"at": f"{i}/1", "index": i, "value": value},
            )
    return points


Schedule = Annotated[tuple[tuple[int, float], ...], AfterValidator(check_schedule)]
"""A piecewise-linear schedule: ``(env_steps_sampled, value)`` points (see
:func:`check_schedule`); constant before the first point and after the last."""


class _PolicyBase(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    hiddens: tuple[int, ...] = Field(
        (64, 64),
        description="Hidden layer widths of each MLP (policy and value nets) when no `model` "
        "is given.",
    )
    activation: Literal["tanh", "relu"] = Field(
        "tanh", description="Hidden activation when no `model` is given."
    )
    model: ModelConfig | None = Field(
        None,
        description=(
            'The network: {"type": "mlp", "hiddens": [...], "activation": ...} or {"type": '
            '"cnn", "conv_filters": [[out_channels, kernel, stride], ...], "hiddens": [...]}, '
            "with vf_share_layers. None: the Nature CNN for [H, W, C] image observations, "
            "else an MLP of `hiddens` and `activation`."
        ),
    )
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor.")
    lr: float = Field(3e-4, gt=0.0, description="Adam learning rate (per optimizer step).")
    lr_schedule: Schedule | None = Field(
        None,
        description=(
            "Piecewise-linear learning rate as (env_steps_sampled, lr) points, env steps "
            ">= 0 and strictly increasing, lr finite and >= 0; held constant after the last "
            "point. Overrides `lr` when set."
        ),
    )
    grad_clip: float | None = Field(
        0.5, gt=0.0, description="Max global L2 norm of the gradient; None disables clipping."
    )

    @field_validator("model")
    @classmethod
    def _one_model_setting(
        cls, model: MLPModel | CNNModel | None, info: ValidationInfo
    ) -> MLPModel | CNNModel | None:
        # hiddens and activation are declared before model, so they are validated already
        both = [
            f
            for f in ("hiddens", "activation")
            if f in info.data and info.data[f] != cls.model_fields[f].default
        ]
        if model is not None and both:
            raise PydanticCustomError(
                "model_and_hiddens",
                "give the network either as `model` or as {fields}, not both (move "
                "{fields} into `model`)",
                {"fields": " and ".join(f"`{f}`" for f in both)},
            )
        return model

    def resolved_model(self, obs_shape: tuple[int, ...]) -> MLPModel | CNNModel:
        """The model for observations of ``obs_shape``: ``model``, else
        ``plangraph.ops.models.default_model``."""
        if self.model is not None:
            return self.model
        return default_model(obs_shape, self.hiddens, self.activation)

    #: what the policy can do (keys of :data:`CAPABILITIES`); not a setting
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients"})
    #: action spaces it can act in (gymnasium space class names); the compiler reads the
    #: env's (``plangraph.compiler.env_spaces``) and refuses others (PG183)
    action_spaces: ClassVar[frozenset[str]] = frozenset({"Discrete"})
    #: whether every bound of a ``Box`` action space must be finite (actions are squashed
    #: into them rather than clipped)
    needs_bounded_actions: ClassVar[bool] = False
    #: the model types (``plangraph.ops.models``) it builds (PG184 for others)
    model_types: ClassVar[frozenset[str]] = frozenset({"mlp", "cnn"})
    #: observation spaces its models read (PG184): a ``Box`` of any dtype and shape
    observation_spaces: ClassVar[frozenset[str]] = frozenset({"Box"})
    #: the batches its loss is correct on (said when a plan feeds it others)
    learns_from: ClassVar[str] = (
        "whole fresh rollout fragments (advantages and value targets computed by GAE when "
        "they were sampled, by the policy being trained)"
    )


class _ActorCriticBase(_PolicyBase):
    """Settings of the stochastic actor-critic policies (a2c, ppo, impala, appo).

    Action distributions by action space (``plangraph.rl.distributions``): ``Discrete``
    categorical, ``MultiDiscrete`` one categorical per component, 1-D ``Box`` a diagonal
    Gaussian whose samples are clipped to the bounds only when sent to the env (the batch
    keeps, and the loss sees, the unclipped sample and its log-probability).
    """

    action_spaces: ClassVar[frozenset[str]] = frozenset({"Discrete", "MultiDiscrete", "Box"})
    free_log_std: bool = Field(
        True,
        description=(
            "Box actions: the Gaussian's log-std is one state-independent parameter vector "
            "(as in Schulman et al. 2017); false: the policy network outputs it per state."
        ),
    )
    log_std_init: float = Field(
        0.0, description="Box actions: initial log-std of the Gaussian (0.0: std 1)."
    )


class A2CConfig(_ActorCriticBase):
    """Advantage actor-critic (Mnih et al. 2016, synchronous): one optimizer step per batch."""

    algo: Literal["a2c"] = "a2c"
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate (per optimizer step).")
    gae_lambda: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda (1.0 = MC returns).")
    vf_loss_coeff: float = Field(0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(0.01, ge=0.0, description="Weight of the entropy bonus.")
    normalize_advantages: bool = Field(
        False, description="Standardise advantages per train batch before the loss."
    )


class PPOConfig(_ActorCriticBase):
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


class _VTraceBase(_ActorCriticBase):
    """Shared settings of the V-trace learners (Espeholt et al. 2018, eq. 1 and sec. 4.2)."""

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


class IMPALAConfig(_VTraceBase):
    """IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

    Defaults follow RLlib's IMPALA (lr 5e-4, grad_clip 40, vf_loss_coeff 0.5,
    entropy_coeff 0.01, rho_bar = c_bar = 1).
    """

    algo: Literal["impala"] = "impala"


class APPOConfig(_VTraceBase):
    """Asynchronous PPO: V-trace advantages in the PPO clipped surrogate (Schulman et al.
    2017, eq. 7) against a target ("old") network, as RLlib's APPO.

    Defaults follow RLlib's APPO (clip_param 0.4, use_kl_loss False, kl_coeff 1.0,
    kl_target 0.01) and otherwise IMPALA's.
    """

    algo: Literal["appo"] = "appo"
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "target_network"})
    clip_param: float = Field(
        0.4, gt=0.0, description="Surrogate clip range epsilon (dimensionless)."
    )
    use_kl_loss: bool = Field(
        False, description="Add kl_coeff * KL(target net || online net) to the loss."
    )
    kl_coeff: float = Field(
        1.0,
        ge=0.0,
        description=(
            "Initial weight of the KL term; adapted at every update_target() (x1.5 when the "
            "KL exceeds 2 * kl_target, x0.5 below kl_target / 2)."
        ),
    )
    kl_target: float = Field(
        0.01, gt=0.0, description="Target KL(target net || online net), in nats per row."
    )


class SACConfig(_PolicyBase):
    """Soft actor-critic (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
    Applications"): a tanh-squashed Gaussian actor, twin Q-networks with target copies
    (UpdateTarget with ``tau`` < 1 keeps them as Polyak averages) and automatic tuning of
    the entropy temperature alpha towards ``target_entropy``.

    Defaults follow the paper's (and SB3's) SAC: 256x256 ReLU networks, lr 3e-4 for the
    actor, the critics and alpha, gamma 0.99, target entropy -dim(A), no gradient clipping.
    """

    algo: Literal["sac"] = "sac"
    learns_from: ClassVar[str] = "single transitions (obs, actions, rewards, next_obs)"
    capabilities: ClassVar[frozenset[str]] = frozenset({"target_network", "replay"})
    action_spaces: ClassVar[frozenset[str]] = frozenset({"Box"})
    needs_bounded_actions: ClassVar[bool] = True
    model_types: ClassVar[frozenset[str]] = frozenset({"mlp"})
    hiddens: tuple[int, ...] = Field(
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
        description="n-step soft Q targets: sum up to n discounted rewards within one "
        "episode and fragment, then bootstrap with gamma**k. 1 = one-step SAC.",
    )


PolicyConfig = Annotated[
    A2CConfig | PPOConfig | DQNConfig | IMPALAConfig | APPOConfig | SACConfig,
    Field(discriminator="algo"),
]

PolicyConfigModel = A2CConfig | PPOConfig | DQNConfig | IMPALAConfig | APPOConfig | SACConfig
"""Any one policy config model (the members of ``PolicyConfig``)."""
