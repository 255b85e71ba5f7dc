"""Model settings of a policy, as data: which network reads the observations.

A model type is registered by name (:func:`register_model`) with a pydantic settings
model (a subclass of :class:`ModelSettings`, torch-free, so the compiler checks it
against the env's observation space without importing torch) and a ``build`` function
that makes the torch module: an *encoder* from observations ``[B, *obs_shape]`` (the
space's dtype) to float32 features ``[B, out_dim]`` (``module.out_dim``), on which each
algorithm puts its own heads (policy and value heads, Q-values, ...), as
Stable-Baselines3's features extractors and RLlib's encoders. A plan writes
``{"type": NAME, ...settings}``. Built in (``plangraph.rl.models``):

* ``{"type": "mlp", "hiddens": [64, 64], "activation": "tanh"}``: observations flattened
  to float32 ``[B, prod(obs_shape)]`` (no rescaling);
* ``{"type": "cnn", "conv_filters": [[32, 8, 4], [64, 4, 2], [64, 3, 1]], "hiddens":
  [512]}``: image observations ``[H, W, C]`` (channels last, as gymnasium's image envs),
  cast to float32 and, when ``uint8``, scaled by 1/255; each ``[out_channels, kernel,
  stride]`` is an unpadded ``Conv2d`` followed by the activation, then the flattened
  features pass ``hiddens`` dense layers. The defaults are the Nature DQN network (Mnih et
  al. 2015, "Methods: model architecture").

* ``{"type": "lstm", "hiddens": [64], "lstm_cell_size": 64, "max_seq_len": 20}``: a
  recurrent model (Hochreiter & Schmidhuber 1997): the ``hiddens`` MLP on the flattened
  observation, then (optionally with the previous action and reward concatenated) an LSTM
  of ``lstm_cell_size`` units (the value head on a copy of its own unless
  ``vf_share_layers``). ``docs/recurrent.md``
  documents the state the rollout workers carry and the sequences the learner trains on.

A *recurrent* model type says so in its settings (``recurrent: ClassVar[bool] = True``);
its module then declares its initial state and maps ``(obs [B, T, ...], state)`` to
``(features [B, T, out_dim], state)`` (``plangraph.rl.models`` has the protocol).

``vf_share_layers``: whether the value head (actor-critic policies) sits on the policy's
trunk (one network, two linear heads) or on a separate network of the same shape. A
policy without ``model`` gets :func:`default_model` for its env's observations.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from plangraph.ops.open_types import OpenSettings

__all__ = [
    "NATURE_CNN_FILTERS",
    "CNNModel",
    "LSTMModel",
    "MLPModel",
    "ModelConfig",
    "ModelSettings",
    "ModelSpec",
    "builtin_model_types",
    "cnn_output_hw",
    "default_model",
    "is_image_shape",
    "model_types",
    "register_model",
    "unregister_model",
]

NATURE_CNN_FILTERS: tuple[tuple[int, int, int], ...] = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""``[out_channels, kernel, stride]`` of the Nature DQN convolutions (for 84x84 frames)."""

_Width = Annotated[int, Field(ge=1, le=65_536)]
_Filter = tuple[
    Annotated[int, Field(ge=1, le=4096)],
    Annotated[int, Field(ge=1, le=64)],
    Annotated[int, Field(ge=1, le=64)],
]


class ModelSettings(BaseModel):
    """Settings every model type has; subclass it for your own (add
    ``type: Literal["name"] = "name"`` and your settings), then :func:`register_model`.

    An actor-critic algorithm reads ``vf_share_layers`` where the settings declare it
    (whether the value head shares the policy's encoder, or gets a separate encoder of the
    same settings) and shares the encoder where they do not.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)

    #: the model type's registered name (each subclass narrows it to ``Literal["name"]``)
    type: str

    #: whether the model is recurrent: its module carries a state from step to step
    #: (``plangraph.rl.models.RecurrentEncoder``); not a setting
    recurrent: ClassVar[bool] = False

    def sequence_length(self) -> int:
        """Recurrent models: the most steps of one training sequence (truncated
        backpropagation through time); a model without a ``max_seq_len`` setting trains
        on sequences of 20."""
        return int(getattr(self, "max_seq_len", 20))

    def state_layout(self) -> dict[str, tuple[int, ...]] | None:
        """Recurrent models: the row shape of each entry of the module's state
        (``{name: shape}``, float32; each becomes the batch column ``state_in_<name>``),
        when the settings tell it; None when only the module knows."""
        return None

    def state_size(self) -> int | None:
        """Recurrent models: float32 entries of one sub-env's state (what a rollout worker
        carries per sub-env and a batch stores per row), from ``state_layout``; None
        when only the module knows."""
        layout = self.state_layout()
        if layout is None:
            return None
        return sum(math.prod(shape) for shape in layout.values())

    def observation_problem(self, obs_shape: tuple[int, ...]) -> tuple[str, str] | None:
        """Why this model cannot read observations of ``obs_shape``, as ``(message,
        hint)``; None when it can (the compiler's PG184 says it before launch)."""
        return None


class MLPModel(ModelSettings):
    """A multi-layer perceptron on the flattened observation."""

    type: Literal["mlp"] = "mlp"
    hiddens: tuple[_Width, ...] = Field((64, 64), description="Hidden layer widths.")
    activation: Literal["tanh", "relu"] = Field("tanh", description="Hidden activation.")
    vf_share_layers: bool = Field(
        False,
        description="Actor-critic: the value head shares the policy's hidden layers "
        "(false: a separate MLP of the same shape).",
    )


class CNNModel(ModelSettings):
    """Convolutions on an image observation ``[H, W, C]``, then dense layers."""

    type: Literal["cnn"] = "cnn"
    conv_filters: tuple[_Filter, ...] = Field(
        NATURE_CNN_FILTERS,
        min_length=1,
        description="[out_channels, kernel, stride] of each unpadded Conv2d, in order.",
    )
    hiddens: tuple[_Width, ...] = Field(
        (512,), description="Dense layer widths after the flattened convolution output."
    )
    activation: Literal["relu", "tanh"] = Field("relu", description="Activation.")
    vf_share_layers: bool = Field(
        True,
        description="Actor-critic: the value head shares the convolutions and dense layers "
        "(false: a separate network of the same shape).",
    )

    def observation_problem(self, obs_shape: tuple[int, ...]) -> tuple[str, str] | None:
        """Observations that are no ``[H, W, C]`` image, or an image too small for the
        convolutions."""
        if not is_image_shape(obs_shape):
            return (
                f"reads [H, W, C] image observations, but the env's are of shape {list(obs_shape)}",
                'use {"type": "mlp"} as the model for vector observations, or an image env',
            )
        sizes = cnn_output_hw((obs_shape[0], obs_shape[1]), self.conv_filters)
        for i, (h, w) in enumerate(sizes):
            if h >= 1 and w >= 1:
                continue
            before = (obs_shape[0], obs_shape[1]) if i == 0 else sizes[i - 1]
            return (
                f"cannot read {obs_shape[0]}x{obs_shape[1]} images: conv_filters[{i}] "
                f"{list(self.conv_filters[i])} ([out_channels, kernel, stride]) does not fit "
                f"the {before[0]}x{before[1]} feature map it gets",
                "give smaller kernels and strides in model.conv_filters (each layer maps n "
                "to floor((n - kernel) / stride) + 1 >= 1), or resize the frames",
            )
        return None


class LSTMModel(ModelSettings):
    """An MLP on the flattened observation, then an LSTM (Hochreiter & Schmidhuber 1997).

    Per step: ``x_t = MLP(obs_t)`` (``hiddens``), concatenated with the previous action
    (one-hot for ``Discrete``, one one-hot per component for ``MultiDiscrete``, the
    unclipped vector for ``Box``; zero at an episode's first step) and the previous reward
    (float32, 0 at an episode's first step) when asked; then one ``torch.nn.LSTM`` layer of
    ``lstm_cell_size`` units whose output is the features (``out_dim = lstm_cell_size``).
    Its state is ``h`` and ``c``, float32 ``[B, lstm_cell_size]`` each, zero at the start of
    every episode; with a separate value network (``vf_share_layers`` false, the default,
    as the ``mlp``'s) also ``vf_h`` and ``vf_c``.
    """

    type: Literal["lstm"] = "lstm"
    recurrent: ClassVar[bool] = True
    hiddens: tuple[_Width, ...] = Field(
        (64,), description="Widths of the MLP layers before the LSTM (empty: none)."
    )
    activation: Literal["tanh", "relu"] = Field("tanh", description="MLP activation.")
    lstm_cell_size: int = Field(64, ge=1, le=8192, description="LSTM units (h and c width).")
    max_seq_len: int = Field(
        20,
        ge=1,
        le=10_000,
        description="Most env steps of one training sequence (backpropagation through time "
        "is truncated there; a sequence also ends at every episode end).",
    )
    lstm_use_prev_action: bool = Field(
        False, description="The previous action is an input of the LSTM."
    )
    lstm_use_prev_reward: bool = Field(
        False, description="The previous reward is an input of the LSTM."
    )

    def state_layout(self) -> dict[str, tuple[int, ...]]:
        """``h`` and ``c``, ``[lstm_cell_size]`` each; with a separate value LSTM also
        ``vf_h`` and ``vf_c``."""
        cell = (self.lstm_cell_size,)
        names = ("h", "c") if self.vf_share_layers else ("h", "c", "vf_h", "vf_c")
        return {name: cell for name in names}

    vf_share_layers: bool = Field(
        False,
        description="Actor-critic: the value head shares the policy's MLP and LSTM (one "
        "state); false: a separate MLP and LSTM of the same shape, with a state of its own "
        "(vf_h, vf_c).",
    )


@dataclass(frozen=True)
class ModelSpec:
    """One registered model type: ``name``, its ``config`` (settings model) and ``build``
    (``build(settings, observation_space) -> torch.nn.Module`` with ``out_dim``, or
    ``"module:function"`` text of one, imported on first use)."""

    name: str
    config: type[ModelSettings]
    build: Any
    builtin: bool = False

    def builder(self) -> Any:
        """The build function, imported if given as text."""
        if not isinstance(self.build, str):
            return self.build
        module, _, attr = self.build.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, ModelSpec] = {}


def register_model(
    name: str, *, config: type[ModelSettings], build: Any, builtin: bool = False
) -> ModelSpec:
    """Make ``{"type": name, ...}`` usable as a policy's ``model``.

    Args:
        name: the model type's name in plans.
        config: its settings: a ``ModelSettings`` subclass whose ``type`` field is
            ``Literal[name]`` with default ``name``.
        build: ``build(settings, observation_space) -> torch.nn.Module``: an encoder from
            observations ``[B, *obs_shape]`` to float32 features ``[B, out_dim]``, with an
            ``out_dim: int`` attribute; or ``"module:function"`` text of it.
        builtin: plangraph's own.

    Registering a name again replaces the earlier entry, except a built-in's.

    Raises:
        TypeError: ``config`` is not a ``ModelSettings`` subclass.
        ValueError: an empty name, ``config.type`` is not ``name``, or ``name`` is a
            built-in model type's.
    """
    if not name:
        raise ValueError("a model type name must not be empty")
    if not (isinstance(config, type) and issubclass(config, ModelSettings)):
        raise TypeError(
            f"model type {name!r}: config must be a subclass of "
            f"plangraph.ops.models.ModelSettings, got {config!r}"
        )
    field = config.model_fields.get("type")
    if field is None or field.default != name:
        raise ValueError(
            f"model type {name!r}: {config.__name__} must declare "
            f'`type: Literal["{name}"] = "{name}"`'
        )
    old = _REGISTRY.get(name)
    if old is not None and old.builtin and not builtin:
        raise ValueError(f"{name!r} is a built-in model type; register yours under another name")
    spec = ModelSpec(name, config, build, builtin)
    _REGISTRY[name] = spec
    return spec


def unregister_model(name: str) -> None:
    """Forget a user model type.

    Raises:
        KeyError: not registered. ValueError: a built-in.
    """
    if _REGISTRY[name].builtin:
        raise ValueError(f"{name!r} is a built-in model type")
    del _REGISTRY[name]


def model_types() -> dict[str, ModelSpec]:
    """The registered model types by name, sorted."""
    return dict(sorted(_REGISTRY.items()))


def builtin_model_types() -> list[ModelSpec]:
    """plangraph's own model types, sorted by name."""
    return [s for s in model_types().values() if s.builtin]


ModelConfig = Annotated[
    ModelSettings,
    OpenSettings(
        base=ModelSettings,
        tag="type",
        registry=_REGISTRY,
        field="a model",
        noun="model type",
        codes=("model_type", "unknown_model"),
    ),
]
"""A field type for a policy's model: any registered model type's settings."""

register_model("mlp", config=MLPModel, build="plangraph.rl.models:build_mlp", builtin=True)
register_model("cnn", config=CNNModel, build="plangraph.rl.models:build_cnn", builtin=True)
register_model("lstm", config=LSTMModel, build="plangraph.rl.models:build_lstm", builtin=True)


def is_image_shape(shape: tuple[int, ...]) -> bool:
    """An observation shape the default model treats as an image: ``[H, W, C]``."""
    return len(shape) == 3


def default_model(
    obs_shape: tuple[int, ...], hiddens: tuple[int, ...], activation: str
) -> ModelSettings:
    """The model of a policy that names none: the Nature CNN for image observations
    (:func:`is_image_shape`), else an MLP of the policy's ``hiddens`` and ``activation``."""
    if is_image_shape(obs_shape):
        return CNNModel()
    return MLPModel(hiddens=hiddens, activation=activation)


def cnn_output_hw(
    hw: tuple[int, int], conv_filters: tuple[tuple[int, int, int], ...]
) -> list[tuple[int, int]]:
    """Spatial size after each unpadded convolution: ``floor((n - kernel) / stride) + 1``
    (a size below 1 means the image is too small for that layer)."""
    out = []
    h, w = hw
    for _, kernel, stride in conv_filters:
        h = math.floor((h - kernel) / stride) + 1
        w = math.floor((w - kernel) / stride) + 1
        out.append((h, w))
    return out
