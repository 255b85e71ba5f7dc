"""Torch networks: MLPs and CNNs for the policy, value function and Q-function.

Built from the policy's model config (``plangraph.ops.models``). MLP observations are
flattened to ``[B, prod(obs_shape)]`` and cast to float32 inside the model (so a ``uint8``
observation is stored and shipped as ``uint8``; no rescaling is applied); CNN ones
``[B, H, W, C]`` are cast inside the model too, ``uint8`` scaled by 1/255.

``ActorCritic`` and ``QNetwork`` are the separate-MLP models of a policy with the default
MLP (their parameter names and initialisation order are what plans trained before models
became data have, so those runs stay the same); ``EncoderActorCritic`` and
``EncoderQNetwork`` serve the other models (a CNN, or a shared value trunk).

Weights use orthogonal initialisation (Saxe et al. 2014) with gain ``sqrt(2)`` on hidden
(and convolution) layers, as in the PPO reference implementations (Engstrom et al. 2020); the
output gain is chosen per head (0.01 for policy logits, 1.0 for values / Q-values).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from plangraph.ops.models import ModelSettings, model_types

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU}


def mlp(
    in_dim: int,
    hiddens: Sequence[int],
    out_dim: int,
    activation: str,
    out_gain: float,
) -> nn.Sequential:
    """``Linear -> act -> ... -> Linear``; ``hiddens=()`` gives a single linear layer.

    Raises:
        ValueError: unknown ``activation``.
    """
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    last = in_dim
    for width in hiddens:
        lin = nn.Linear(last, int(width))
        nn.init.orthogonal_(lin.weight, gain=math.sqrt(2.0))
        nn.init.zeros_(lin.bias)
        layers += [lin, _ACTIVATIONS[activation]()]
        last = int(width)
    out = nn.Linear(last, out_dim)
    nn.init.orthogonal_(out.weight, gain=out_gain)
    nn.init.zeros_(out.bias)
    layers.append(out)
    return nn.Sequential(*layers)


def mlp_forward(net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` for an ``mlp`` without per-module call overhead (same ops, same result).

    A rollout worker runs one forward per vector step on a handful of rows, where
    ``nn.Module.__call__`` costs more than the arithmetic.
    """
    for layer in net:
        if isinstance(layer, nn.Linear):
            x = F.linear(x, layer.weight, layer.bias)
        elif isinstance(layer, nn.Tanh):
            x = torch.tanh(x)
        else:
            x = torch.relu(x)
    return x


def flatten_obs(obs: torch.Tensor) -> torch.Tensor:
    """``[B, *obs_shape]`` of any dtype -> float32 ``[B, prod(obs_shape)]``."""
    if obs.dim() == 2 and obs.dtype == torch.float32:
        return obs  # what the reshape and the cast would return; two torch calls fewer
    return obs.reshape(obs.shape[0], -1).to(torch.float32)


class ActorCritic(nn.Module):
    """Separate policy and value MLPs (no shared trunk).

    ``pi(obs)``: distribution inputs float32 ``[B, num_inputs]`` (``plangraph.rl.
    distributions``); ``vf(obs)``: values float32 ``[B]``.

    ``gaussian_dim = D > 0`` makes ``pi`` a diagonal Gaussian's ``[mean (D), log_std (D)]``:
    with ``free_log_std`` the policy MLP outputs the D means and ``log_std`` is one
    state-independent parameter vector (initialised to ``log_std_init``); otherwise the
    MLP outputs both halves (its log-std bias starts at ``log_std_init``).
    """

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        hiddens: Sequence[int],
        activation: str,
        *,
        gaussian_dim: int = 0,
        free_log_std: bool = True,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        self.free_log_std = gaussian_dim > 0 and free_log_std
        out = gaussian_dim if self.free_log_std else num_actions
        self.pi_net = mlp(obs_dim, hiddens, out, activation, out_gain=0.01)
        self.vf_net = mlp(obs_dim, hiddens, 1, activation, out_gain=1.0)
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.full((gaussian_dim,), float(log_std_init)))
        elif gaussian_dim > 0:
            out_layer = self.pi_net[-1]
            assert isinstance(out_layer, nn.Linear), "mlp() ends in a Linear layer"
            with torch.no_grad():
                out_layer.bias[gaussian_dim:] = float(log_std_init)

    def pi(self, obs: torch.Tensor) -> torch.Tensor:
        out = mlp_forward(self.pi_net, flatten_obs(obs))
        if self.free_log_std:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def vf(self, obs: torch.Tensor) -> torch.Tensor:
        return mlp_forward(self.vf_net, flatten_obs(obs)).squeeze(-1)

    def pi_vf(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pi(obs), vf(obs))``."""
        return self.pi(obs), self.vf(obs)


class QNetwork(nn.Module):
    """Q-value MLP: ``forward(obs)`` -> float32 ``[B, num_actions]``."""

    def __init__(
        self, obs_dim: int, num_actions: int, hiddens: Sequence[int], activation: str
    ) -> None:
        super().__init__()
        self.q_net = mlp(obs_dim, hiddens, num_actions, activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return mlp_forward(self.q_net, flatten_obs(obs))


class MLPEncoder(nn.Module):
    """Hidden layers of an MLP on the flattened observation: ``[B, *obs_shape]`` of any
    dtype -> float32 features ``[B, hiddens[-1]]`` (``[B, obs_dim]`` with no hiddens)."""

    def __init__(self, obs_dim: int, hiddens: Sequence[int], activation: str) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        last = obs_dim
        for width in hiddens:
            lin = nn.Linear(last, int(width))
            nn.init.orthogonal_(lin.weight, gain=math.sqrt(2.0))
            nn.init.zeros_(lin.bias)
            layers += [lin, _ACTIVATIONS[activation]()]
            last = int(width)
        self.net = nn.Sequential(*layers)
        self.out_dim = last

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return mlp_forward(self.net, flatten_obs(obs))


class CNNEncoder(nn.Module):
    """Convolutions then dense layers on image observations ``[B, H, W, C]`` (channels
    last; ``uint8`` scaled by 1/255, other dtypes cast to float32 as they are) ->
    float32 features ``[B, hiddens[-1]]``. ``conv_filters``: ``(out_channels, kernel,
    stride)`` of each unpadded ``Conv2d``; the defaults of ``plangraph.ops.models.CNNModel``
    are the Nature DQN network (Mnih et al. 2015).

    Raises:
        ValueError: observations that are not ``[H, W, C]``, or an image too small for the
            convolutions.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        scale_uint8: bool,
        conv_filters: Sequence[Sequence[int]],
        hiddens: Sequence[int],
        activation: str,
    ) -> None:
        super().__init__()
        if len(obs_shape) != 3:
            raise ValueError(f"a CNN reads [H, W, C] image observations, got shape {obs_shape}")
        h, w, channels = (int(d) for d in obs_shape)
        self.scale = 1.0 / 255.0 if scale_uint8 else None
        act = _ACTIVATIONS[activation]
        layers: list[nn.Module] = []
        for out_ch, kernel, stride in conv_filters:
            conv = nn.Conv2d(channels, int(out_ch), int(kernel), int(stride))
            assert conv.bias is not None, "Conv2d has a bias by default"
            nn.init.orthogonal_(conv.weight, gain=math.sqrt(2.0))
            nn.init.zeros_(conv.bias)
            layers += [conv, act()]
            channels = int(out_ch)
            h, w = (h - int(kernel)) // int(stride) + 1, (w - int(kernel)) // int(stride) + 1
            if h < 1 or w < 1:
                raise ValueError(
                    f"image {list(obs_shape)} is too small for conv_filters {list(conv_filters)}"
                )
        layers.append(nn.Flatten())
        self.convs = nn.Sequential(*layers)
        self.dense = MLPEncoder(channels * h * w, hiddens, activation)
        self.out_dim = self.dense.out_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.permute(0, 3, 1, 2).to(torch.float32)
        if self.scale is not None:
            x = x * self.scale
        return mlp_forward(self.dense.net, self.convs(x))


Encoder = nn.Module
"""A model's observation encoder (``build_encoder``); ``out_dim`` is the width of its
features."""


def build_mlp(settings: Any, observation_space: gym.spaces.Box) -> MLPEncoder:
    """The ``"mlp"`` model type's encoder (``plangraph.ops.models.MLPModel``)."""
    obs_dim = int(np.prod(observation_space.shape))
    return MLPEncoder(obs_dim, settings.hiddens, settings.activation)


def build_cnn(settings: Any, observation_space: gym.spaces.Box) -> CNNEncoder:
    """The ``"cnn"`` model type's encoder (``plangraph.ops.models.CNNModel``)."""
    return CNNEncoder(
        tuple(observation_space.shape),
        np.dtype(observation_space.dtype) == np.uint8,
        settings.conv_filters,
        settings.hiddens,
        settings.activation,
    )


def build_encoder(model: ModelSettings, observation_space: gym.spaces.Box) -> nn.Module:
    """The encoder of a registered model type (``plangraph.ops.models.register_model``)
    for ``observation_space``: observations ``[B, *obs_shape]`` -> float32 features
    ``[B, out_dim]``.

    Raises:
        TypeError: the model type's ``build`` returned no ``torch.nn.Module`` with an
            integer ``out_dim`` (the message names the model type).
    """
    spec = model_types()[model.type]
    encoder = spec.builder()(model, observation_space)
    out_dim = getattr(encoder, "out_dim", None)
    if not isinstance(encoder, nn.Module) or not isinstance(out_dim, int) or out_dim < 1:
        raise TypeError(
            f"model type {model.type!r}: build(settings, observation_space) must return a "
            "torch.nn.Module with an int attribute out_dim >= 1 (the width of the features "
            f"it outputs), got {type(encoder).__name__} with out_dim={out_dim!r}"
        )
    return encoder


def _head(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    lin = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(lin.weight, gain=gain)
    nn.init.zeros_(lin.bias)
    return lin


class EncoderActorCritic(nn.Module):
    """Actor-critic on encoders (``build_encoder``): the value head on the policy's
    encoder (``vf_share_layers``) or on a separate one of the same shape.

    ``pi(obs)``: distribution inputs float32 ``[B, num_inputs]`` (Gaussian: as
    ``ActorCritic``); ``vf(obs)``: float32 ``[B]``; ``pi_vf(obs)``: both, one encoder
    pass when shared.
    """

    def __init__(
        self,
        make_encoder: Callable[[], Encoder],
        num_actions: int,
        vf_share_layers: bool,
        *,
        gaussian_dim: int = 0,
        free_log_std: bool = True,
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        self.pi_encoder = make_encoder()
        self.vf_encoder = None if vf_share_layers else make_encoder()
        self.free_log_std = gaussian_dim > 0 and free_log_std
        out = gaussian_dim if self.free_log_std else num_actions
        feat: int = self.pi_encoder.out_dim  # type: ignore[assignment]  # build_encoder checked it
        self.pi_head = _head(feat, out, 0.01)
        self.vf_head = _head(feat, 1, 1.0)
        if self.free_log_std:
            self.log_std = nn.Parameter(torch.full((gaussian_dim,), float(log_std_init)))
        elif gaussian_dim > 0:
            with torch.no_grad():
                self.pi_head.bias[gaussian_dim:] = float(log_std_init)

    def _dist_inputs(self, features: torch.Tensor) -> torch.Tensor:
        out = F.linear(features, self.pi_head.weight, self.pi_head.bias)
        if self.free_log_std:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def _value(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(features, self.vf_head.weight, self.vf_head.bias).squeeze(-1)

    def pi(self, obs: torch.Tensor) -> torch.Tensor:
        return self._dist_inputs(self.pi_encoder(obs))

    def vf(self, obs: torch.Tensor) -> torch.Tensor:
        encoder = self.pi_encoder if self.vf_encoder is None else self.vf_encoder
        return self._value(encoder(obs))

    def pi_vf(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.vf_encoder is None:
            features = self.pi_encoder(obs)
            return self._dist_inputs(features), self._value(features)
        return self.pi(obs), self.vf(obs)


class EncoderQNetwork(nn.Module):
    """Q-values on an encoder (``build_encoder``): ``forward(obs)`` -> float32
    ``[B, num_actions]``."""

    def __init__(self, encoder: Encoder, num_actions: int) -> None:
        super().__init__()
        self.encoder = encoder
        out_dim: int = encoder.out_dim  # type: ignore[assignment]  # build_encoder checked it
        self.q_head = _head(out_dim, num_actions, 1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return F.linear(self.encoder(obs), self.q_head.weight, self.q_head.bias)


def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """Polyak averaging: every floating-point parameter and buffer
    ``t <- (1 - tau) t + tau o`` of two modules of the same structure (``Tensor.lerp_``,
    in place, without autograd); a buffer of another dtype (a count) is copied."""
    with torch.no_grad():
        dst = [*target.parameters(), *target.buffers()]
        src = [*online.parameters(), *online.buffers()]
        for t, o in zip(dst, src, strict=True):
            if t.is_floating_point():
                t.lerp_(o, float(tau))
            else:
                t.copy_(o)
