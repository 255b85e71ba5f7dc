"""The base of every algorithm's settings, carried by a plan's ``WorkerSet`` resource.

Pure pydantic: the compiler validates settings without importing torch; ``plangraph.rl``
reads them (``make_policy(obs_space, action_space, config)``) when a plan is built. Each
algorithm's own model subclasses :class:`AlgorithmConfig` (or :class:`ActorCriticConfig`)
in its folder (``plangraph/algorithms/<name>/config.py``, or a user's module) and is
registered by name (``plangraph.ops.algorithms.register_algorithm``); its class variables
say what it can do, and its hook methods what its sampled rows hold.

Units: learning rates per optimizer step; ``*_timesteps`` and schedule points in env
steps sampled (``num_env_steps_sampled``). Every number must be finite
(``allow_inf_nan=False``): NaN or Infinity is a PG141.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from plangraph.ops.models import ModelConfig, ModelSettings, default_model
from plangraph.ops.sizes import MAX_N_STEP, HiddenSizes

__all__ = [
    "CAPABILITIES",
    "GAE_COLUMNS",
    "MAX_N_STEP",
    "ActorCriticConfig",
    "AlgorithmConfig",
    "ColumnLayout",
    "HiddenSizes",
    "Schedule",
    "check_schedule",
]

ColumnLayout = dict[str, tuple[tuple[int, ...], str]]
"""Per-row shape and numpy dtype name of batch columns: ``{"obs": ((4,), "float32")}``."""

CAPABILITIES: dict[str, str] = {
    "gradients": "computes gradients without applying them and applies given gradients "
    "(ComputeGradients, ApplyGradients)",
    "target_network": "keeps a target network that UpdateTarget syncs with the online one",
    "replay": "learns from single transitions sampled out of order from a replay buffer "
    "(its loss needs only obs, actions, rewards, next_obs, terminateds)",
    "kl_penalty": "has a KL penalty term whose coefficient UpdateKL adapts (update_kl)",
    "off_policy_batches": "corrects for the age of whole batches sampled by older policies "
    "(V-trace), so MixInReplay may feed it",
    "all_reduce": "trains on each rollout worker and averages the gradients over the "
    "workers' torch.distributed process group before every optimizer step (DD-PPO)",
    "meta_learning": "adapts a copy of itself to one task on a rollout worker "
    "(adapt_in_place) and meta-updates through that adaptation (meta_update): MAML",
}
"""What a policy can do, by name: the vocabulary of each config model's ``capabilities``.

Kept as data here (not read off the torch classes in ``plangraph.rl``) so the compiler
can refuse an operator the policy cannot serve without importing torch; each entry
mirrors the policy class: ``update_target()`` exists on DQN, APPO and SAC only,
``update_kl()`` on PPO only, V-trace (IMPALA, APPO) corrects old whole batches, and only
DQN's and SAC's losses are correct on replayed rows (A2C/PPO need the advantages of whole
fresh fragments, IMPALA/APPO's V-trace whole segments in order).
"""


GAE_COLUMNS = ("vf_preds", "bootstrap_values", "advantages", "value_targets")
"""The columns GAE postprocessing adds (``plangraph.rl.postprocessing.gae_columns``)."""


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


_OPTIMIZER_SETTINGS: dict[str, frozenset[str]] = {
    "adam": frozenset({"betas", "eps", "weight_decay"}),
    "adamw": frozenset({"betas", "eps", "weight_decay"}),
    "rmsprop": frozenset({"alpha", "eps", "weight_decay", "momentum", "centered"}),
    "sgd": frozenset({"momentum", "weight_decay", "nesterov"}),
}


class OptimizerSettings(BaseModel):
    """Which ``torch.optim`` optimizer the learner steps, and its settings (the learning
    rate is the algorithm's ``lr``/``lr_schedule``). Each setting applies to the types
    named in its description; giving one to another type is refused."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    type: Literal["adam", "adamw", "rmsprop", "sgd"] = Field(
        "adam",
        description="torch.optim.Adam, AdamW (decoupled weight decay), RMSprop or SGD.",
    )
    eps: float = Field(
        1e-5,
        gt=0.0,
        description="adam, adamw, rmsprop: added to the denominator (1e-5, as RLlib and "
        "Stable-Baselines3; torch's default is 1e-8).",
    )
    betas: tuple[
        Annotated[float, Field(ge=0.0, lt=1.0)], Annotated[float, Field(ge=0.0, lt=1.0)]
    ] = Field((0.9, 0.999), description="adam, adamw: decay rates of the moment estimates.")
    weight_decay: float | None = Field(
        None,
        ge=0.0,
        description="L2 penalty (adamw: decoupled); None: torch's default (0.01 for adamw, "
        "else 0).",
    )
    momentum: float = Field(0.0, ge=0.0, description="rmsprop, sgd: momentum factor.")
    alpha: float = Field(
        0.99, gt=0.0, lt=1.0, description="rmsprop: smoothing constant of the squared mean."
    )
    centered: bool = Field(False, description="rmsprop: normalise by the gradient's variance.")
    nesterov: bool = Field(False, description="sgd: Nesterov momentum (needs momentum > 0).")

    @model_validator(mode="after")
    def _settings_of_the_type(self) -> OptimizerSettings:
        allowed = _OPTIMIZER_SETTINGS[self.type]
        # By value, not by presence: a dumped config holds every setting at its default.
        fields = type(self).model_fields
        changed = {n for n, f in fields.items() if getattr(self, n) != f.get_default()}
        for name in sorted(changed - {"type"} - allowed):
            takers = ", ".join(t for t, s in _OPTIMIZER_SETTINGS.items() if name in s)
            raise PydanticCustomError(
                "optimizer_setting",
                "{name} is not a setting of the {type} optimizer (it is one of {takers}); "
                "remove it or change the type",
                {"name": name, "type": self.type, "takers": takers, "at": name},
            )
        if self.nesterov and self.momentum <= 0.0:
            raise PydanticCustomError(
                "optimizer_setting",
                "nesterov needs momentum > 0",
                {"at": "nesterov"},
            )
        return self

    @model_serializer(mode="wrap")
    def _dump_what_applies(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The type and the settings that differ from their defaults: the settings of the
        # other types never apply, and the defaults are the defaults.
        data: dict[str, Any] = handler(self)
        fields = type(self).model_fields
        return {
            k: v
            for k, v in data.items()
            if k == "type" or getattr(self, k) != fields[k].get_default()
        }

    @property
    def decay(self) -> float:
        """``weight_decay``, or torch's default for the type."""
        if self.weight_decay is not None:
            return self.weight_decay
        return 0.01 if self.type == "adamw" else 0.0


class AlgorithmConfig(BaseModel):
    """Settings every algorithm has (network, discount, learning rate, clipping), what it
    can do (class variables, read by the compiler) and what its sampled rows hold.

    Subclass it for your own algorithm: add ``algo: Literal["name"] = "name"`` and your
    settings (pydantic ``Field``s with a description and bounds), set the class variables
    that differ, then ``register_algorithm("name", config=..., policy=...)``.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    hiddens: HiddenSizes = Field(
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
            'The network, a registered model type {"type": NAME, ...settings}: built in '
            '{"type": "mlp", "hiddens": [...], "activation": ...} and {"type": "cnn", '
            '"conv_filters": [[out_channels, kernel, stride], ...], "hiddens": [...]}, with '
            "vf_share_layers; or one registered with plangraph.register_model. None: the "
            "Nature CNN for [H, W, C] image observations, else an MLP of `hiddens` and "
            "`activation`."
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
    optimizer: OptimizerSettings = Field(
        default_factory=OptimizerSettings,
        description='The torch.optim optimizer and its settings: {"type": "adam"} (the '
        'default, eps 1e-5), "adamw", "rmsprop" or "sgd".',
    )

    #: the algorithm's registered name (each subclass narrows it to ``Literal["name"]``)
    algo: str

    @field_validator("model")
    @classmethod
    def _one_model_setting(
        cls, model: ModelSettings | None, info: ValidationInfo
    ) -> ModelSettings | None:
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

    def resolved_model(self, obs_shape: tuple[int, ...]) -> ModelSettings:
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
    #: the model types (``plangraph.ops.models``) it builds (PG184 for others); None: any
    #: registered model type (each is an encoder the algorithm puts its heads on)
    model_types: ClassVar[frozenset[str] | None] = None
    #: whether it learns with a recurrent model (``ModelSettings.recurrent``: it acts
    #: through ``compute_actions_recurrent`` and trains on whole sequences; PG184 for
    #: an algorithm that does not)
    recurrent_models: ClassVar[bool] = False
    #: what it learns from when replayed: ``"transition"`` (single rows) or ``"sequence"``
    #: (whole sequences with their stored state: a replay resource of ``item``
    #: ``"sequence"``, R2D2); a replay resource of the other item is refused (PG197)
    replay_item: ClassVar[str] = "transition"
    #: observation spaces its models read (PG184): a ``Box`` of any dtype and shape
    observation_spaces: ClassVar[frozenset[str]] = frozenset({"Box"})
    #: the columns its learner's loss reads from a recorded dataset (``ReadExperiences``)
    #: besides those every recording has (``obs, actions, rewards, terminateds,
    #: truncateds, eps_id, t``) and those the reader adds (``returns``): the torch-free
    #: twin of the learner's ``loss_columns`` (less its optional ones), so that
    #: ``plangraph validate --datasets`` checks a dataset as ``plangraph run`` does (tests
    #: keep the two equal for the built-ins); None: not declared (validate then checks the
    #: recorded columns and the env's spaces only, run the learner's columns too)
    dataset_columns: ClassVar[tuple[str, ...] | None] = None
    #: the batches its loss is correct on (said when a plan feeds it others)
    learns_from: ClassVar[str] = (
        "whole fresh rollout fragments (advantages and value targets computed by GAE when "
        "they were sampled, by the policy being trained)"
    )

    # --- hooks (torch-free: the compiler and the memory check call them) ---------------
    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """The columns a sampled row holds besides ``obs, actions, rewards, terminateds,
        truncateds, eps_id, t``: what the learner's ``compute_actions`` extras and
        ``postprocess_fragment`` add (sizes a replay buffer before launch).

        Args:
            obs: the observation's row shape and dtype name.
            dist_inputs: width of the action distribution's inputs for the env's action
                space (``plangraph.rl.action_layout``).
        """
        return {}

    def worker_set_notes(self, num_workers: int) -> list[str]:
        """Lines ``plangraph explain`` prints about a worker set of ``num_workers`` rollout
        workers running this algorithm (e.g. each worker's exploration); none by default."""
        return []


class ActorCriticConfig(AlgorithmConfig):
    """Settings of stochastic actor-critic policies (a2c, ppo, impala, appo, pg).

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

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """The behaviour policy's ``action_logp`` and ``action_dist_inputs``, then what GAE
        adds (``vf_preds``, ``bootstrap_values``, ``advantages``, ``value_targets``)."""
        return {
            "action_logp": ((), "float32"),
            "action_dist_inputs": ((dist_inputs,), "float32"),
            **{c: ((), "float32") for c in GAE_COLUMNS},
        }
