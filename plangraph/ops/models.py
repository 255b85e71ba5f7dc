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

``vf_share_layers``: whether the value head (actor-critic policies) sits on the policy's
trunk (one network, two linear heads) or on a separate network of the same shape. A
policy without ``model`` gets :func:`default_model` for its env's observations.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from plangraph.ops.open_types import OpenSettings

__all__ = [
    "NATURE_CNN_FILTERS",
    "CNNModel",
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
