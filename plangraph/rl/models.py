"""Torch networks: MLPs for the policy, value function and Q-function.

Observations are flattened to ``[B, prod(obs_shape)]`` and cast to float32 inside the
model (so a ``uint8`` observation is stored and shipped as ``uint8``; no rescaling is
applied). Weights use orthogonal initialisation (Saxe et al. 2014) with gain ``sqrt(2)``
on hidden layers, as in the PPO reference implementations (Engstrom et al. 2020); the
output gain is chosen per head (0.01 for policy logits, 1.0 for values / Q-values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

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
            with torch.no_grad():
                self.pi_net[-1].bias[gaussian_dim:] = float(log_std_init)

    def pi(self, obs: torch.Tensor) -> torch.Tensor:
        out = mlp_forward(self.pi_net, flatten_obs(obs))
        if self.free_log_std:
            return torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def vf(self, obs: torch.Tensor) -> torch.Tensor:
        return mlp_forward(self.vf_net, flatten_obs(obs)).squeeze(-1)


class QNetwork(nn.Module):
    """Q-value MLP: ``forward(obs)`` -> float32 ``[B, num_actions]``."""

    def __init__(
        self, obs_dim: int, num_actions: int, hiddens: Sequence[int], activation: str
    ) -> None:
        super().__init__()
        self.q_net = mlp(obs_dim, hiddens, num_actions, activation, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return mlp_forward(self.q_net, flatten_obs(obs))
