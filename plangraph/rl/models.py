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

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
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


RecurrentState = dict[str, torch.Tensor]
"""A recurrent module's state: ``{name: float32 [B, ...]}`` (the LSTM's ``{"h": [B, cell],
"c": [B, cell]}``), one row per sequence (acting: per sub-env)."""


class RecurrentEncoder(nn.Module):
    """The protocol of a recurrent model's module (``ModelSettings.recurrent``); subclass it
    or give the same three members (a duck-typed module works too):

    * ``out_dim: int``: the width of the features;
    * ``initial_state(batch_size) -> {name: float32 [batch_size, ...]}``: the state at an
      episode's start (names are letters, digits and ``_``: each becomes the batch column
      ``state_in_<name>``);
    * ``forward(obs, state, prev_actions, prev_rewards) -> (features, state)``: ``obs``
      ``[B, T, *obs_shape]`` (the space's dtype), ``state`` as ``initial_state`` gives it
      (the state before step 0), ``prev_actions`` ``[B, T, *action_shape]`` (int64 or
      float32: the action taken at the step before, zero at an episode's first step),
      ``prev_rewards`` float32 ``[B, T]`` (likewise); returns float32 features
      ``[B, T, out_dim]`` and the state after step ``T - 1``. A sequence never holds an
      episode's end before its last step, so the module needs no resets; the learner pads
      sequences shorter than ``T`` at their end and ignores those steps' features.
    """

    out_dim: int

    def initial_state(self, batch_size: int) -> RecurrentState:
        raise NotImplementedError

    def forward(
        self,
        obs: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        prev_actions: torch.Tensor,
        prev_rewards: torch.Tensor,
    ) -> tuple[torch.Tensor, RecurrentState]:
        raise NotImplementedError


class LSTMEncoder(RecurrentEncoder):
    """The ``"lstm"`` model type (``plangraph.ops.models.LSTMModel``; Hochreiter &
    Schmidhuber 1997): an MLP per step, optionally the previous action (one-hot for
    ``Discrete``/``MultiDiscrete``) and reward appended, then one ``nn.LSTM`` layer
    (``batch_first``). State ``{"h", "c"}``, float32 ``[B, lstm_cell_size]`` each, zeros
    at an episode's start. Features: the LSTM's output, float32 ``[B, T, lstm_cell_size]``.

    Raises:
        ValueError: ``use_prev_action`` with no action space, or an action space other
            than ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box``.
    """

    def __init__(
        self,
        obs_dim: int,
        hiddens: Sequence[int],
        activation: str,
        cell_size: int,
        *,
        action_space: gym.Space[Any] | None = None,
        use_prev_action: bool = False,
        use_prev_reward: bool = False,
    ) -> None:
        super().__init__()
        self.mlp = MLPEncoder(obs_dim, hiddens, activation)
        self.action_sizes: tuple[int, ...] = ()
        self.box_action = False
        if use_prev_action:
            if isinstance(action_space, gym.spaces.Discrete):
                self.action_sizes = (int(action_space.n),)
            elif isinstance(action_space, gym.spaces.MultiDiscrete):
                self.action_sizes = tuple(int(n) for n in action_space.nvec)
            elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
                self.box_action = True
                self.action_sizes = (int(action_space.shape[0]),)
            else:
                raise ValueError(
                    "lstm_use_prev_action reads a Discrete, MultiDiscrete or 1-D Box "
                    f"action space, got {action_space}"
                )
        self.use_prev_reward = use_prev_reward
        in_dim = self.mlp.out_dim + sum(self.action_sizes) + int(use_prev_reward)
        self.lstm = nn.LSTM(in_dim, int(cell_size), batch_first=True)
        self.cell_size = int(cell_size)
        self.out_dim = int(cell_size)

    def initial_state(self, batch_size: int) -> RecurrentState:
        zeros = torch.zeros(batch_size, self.cell_size)
        return {"h": zeros, "c": zeros.clone()}

    def forward(
        self,
        obs: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        prev_actions: torch.Tensor,
        prev_rewards: torch.Tensor,
    ) -> tuple[torch.Tensor, RecurrentState]:
        b, t = obs.shape[0], obs.shape[1]
        x = self.mlp(obs.reshape(b * t, *obs.shape[2:])).reshape(b, t, -1)
        parts = [x]
        if self.action_sizes:
            if self.box_action:
                parts.append(prev_actions.reshape(b, t, -1).to(torch.float32))
            else:
                acts = prev_actions.reshape(b, t, -1).long()
                parts += [
                    F.one_hot(acts[..., i], n).to(torch.float32)
                    for i, n in enumerate(self.action_sizes)
                ]
        if self.use_prev_reward:
            parts.append(prev_rewards.reshape(b, t, 1).to(torch.float32))
        if len(parts) > 1:
            x = torch.cat(parts, dim=-1)
        out, (h, c) = self.lstm(x, (state["h"].unsqueeze(0), state["c"].unsqueeze(0)))
        return out, {"h": h.squeeze(0), "c": c.squeeze(0)}


def build_lstm(
    settings: Any, observation_space: gym.spaces.Box, action_space: gym.Space[Any] | None = None
) -> LSTMEncoder:
    """The ``"lstm"`` model type's encoder (``plangraph.ops.models.LSTMModel``)."""
    return LSTMEncoder(
        int(np.prod(observation_space.shape)),
        settings.hiddens,
        settings.activation,
        settings.lstm_cell_size,
        action_space=action_space,
        use_prev_action=settings.lstm_use_prev_action,
        use_prev_reward=settings.lstm_use_prev_reward,
    )


def build_encoder(
    model: ModelSettings,
    observation_space: gym.spaces.Box,
    action_space: gym.Space[Any] | None = None,
) -> nn.Module:
    """The encoder of a registered model type (``plangraph.ops.models.register_model``)
    for ``observation_space``: observations ``[B, *obs_shape]`` -> float32 features
    ``[B, out_dim]`` (a recurrent model: ``RecurrentEncoder``). ``action_space`` is passed
    on as ``build(..., action_space=...)`` to a build function that takes that keyword
    (a recurrent model that reads the previous action).

    Raises:
        TypeError: the model type's ``build`` returned no ``torch.nn.Module`` with an
            integer ``out_dim`` (the message names the model type), or a recurrent model
            type's module has no ``initial_state``.
    """
    spec = model_types()[model.type]
    builder = spec.builder()
    kwargs: dict[str, Any] = {}
    if action_space is not None and "action_space" in inspect.signature(builder).parameters:
        kwargs["action_space"] = action_space
    encoder = builder(model, observation_space, **kwargs)
    out_dim = getattr(encoder, "out_dim", None)
    if not isinstance(encoder, nn.Module) or not isinstance(out_dim, int) or out_dim < 1:
        raise TypeError(
            f"model type {model.type!r}: build(settings, observation_space) must return a "
            "torch.nn.Module with an int attribute out_dim >= 1 (the width of the features "
            f"it outputs), got {type(encoder).__name__} with out_dim={out_dim!r}"
        )
    if model.recurrent and not callable(getattr(encoder, "initial_state", None)):
        raise TypeError(
            f"model type {model.type!r} is recurrent (its settings say recurrent = True), so "
            "its module must have initial_state(batch_size) -> {name: float32 tensor "
            f"[batch_size, ...]}}; {type(encoder).__name__} has none"
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


class RecurrentActorCritic(EncoderActorCritic):
    """Actor-critic on recurrent encoders (``RecurrentEncoder``): the value head on the
    policy's encoder (``vf_share_layers``: one state serves both) or on a separate one of
    the same shape, with a state of its own (its entries named ``vf_<name>``).

    ``forward_seq(obs [B, T, ...], state, prev_actions [B, T, ...], prev_rewards [B, T])``
    -> ``(dist_inputs float32 [B, T, num_inputs], values float32 [B, T], state after the
    last step)``. ``pi``/``vf``/``pi_vf`` of a single observation have no state to read:
    they raise ``TypeError``.
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
        super().__init__(
            make_encoder,
            num_actions,
            vf_share_layers,
            gaussian_dim=gaussian_dim,
            free_log_std=free_log_std,
            log_std_init=log_std_init,
        )

    def initial_state(self, batch_size: int) -> RecurrentState:
        """The encoders' state of ``batch_size`` fresh episodes."""
        state = dict(self.pi_encoder.initial_state(batch_size))  # type: ignore[operator]
        if self.vf_encoder is not None:
            vf_state = self.vf_encoder.initial_state(batch_size)  # type: ignore[operator]
            state.update({f"vf_{k}": v for k, v in vf_state.items()})
        return state

    def forward_seq(
        self,
        obs: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        prev_actions: torch.Tensor,
        prev_rewards: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, RecurrentState]:
        if self.vf_encoder is None:
            features, out = self.pi_encoder(obs, state, prev_actions, prev_rewards)
            return self._dist_inputs(features), self._value(features), dict(out)
        pi_in = {k: v for k, v in state.items() if not k.startswith("vf_")}
        vf_in = {k[3:]: v for k, v in state.items() if k.startswith("vf_")}
        pi_features, pi_out = self.pi_encoder(obs, pi_in, prev_actions, prev_rewards)
        vf_features, vf_out = self.vf_encoder(obs, vf_in, prev_actions, prev_rewards)
        out = dict(pi_out)
        out.update({f"vf_{k}": v for k, v in vf_out.items()})
        return self._dist_inputs(pi_features), self._value(vf_features), out

    def _stateless(self) -> TypeError:
        return TypeError(
            "a recurrent model has no pi/vf of single observations: it needs its state "
            "(forward_seq, or the policy's compute_actions_recurrent)"
        )

    def pi(self, obs: torch.Tensor) -> torch.Tensor:
        raise self._stateless()

    def vf(self, obs: torch.Tensor) -> torch.Tensor:
        raise self._stateless()

    def pi_vf(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise self._stateless()


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
