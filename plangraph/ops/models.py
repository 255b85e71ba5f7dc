"""Model settings of a policy, as data: which network reads the observations.

Pure pydantic (the compiler checks them against the env's observation space without
importing torch); ``plangraph.rl.models`` builds the torch networks from them.

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

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "NATURE_CNN_FILTERS",
    "CNNModel",
    "MLPModel",
    "ModelConfig",
    "cnn_output_hw",
    "default_model",
    "is_image_shape",
]

NATURE_CNN_FILTERS: tuple[tuple[int, int, int], ...] = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""``[out_channels, kernel, stride]`` of the Nature DQN convolutions (for 84x84 frames)."""

_Width = Annotated[int, Field(ge=1, le=65_536)]
_Filter = tuple[
    Annotated[int, Field(ge=1, le=4096)],
    Annotated[int, Field(ge=1, le=64)],
    Annotated[int, Field(ge=1, le=64)],
]


class MLPModel(BaseModel):
    """A multi-layer perceptron on the flattened observation."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    type: Literal["mlp"] = "mlp"
    hiddens: tuple[_Width, ...] = Field((64, 64), description="Hidden layer widths.")
    activation: Literal["tanh", "relu"] = Field("tanh", description="Hidden activation.")
    vf_share_layers: bool = Field(
        False,
        description="Actor-critic: the value head shares the policy's hidden layers "
        "(false: a separate MLP of the same shape).",
    )


class CNNModel(BaseModel):
    """Convolutions on an image observation ``[H, W, C]``, then dense layers."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

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


ModelConfig = Annotated[MLPModel | CNNModel, Field(discriminator="type")]
"""A policy's model: :class:`MLPModel` or :class:`CNNModel`, discriminated on ``type``."""


def is_image_shape(shape: tuple[int, ...]) -> bool:
    """An observation shape the default model treats as an image: ``[H, W, C]``."""
    return len(shape) == 3


def default_model(
    obs_shape: tuple[int, ...], hiddens: tuple[int, ...], activation: str
) -> MLPModel | CNNModel:
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
