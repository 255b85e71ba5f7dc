"""Action distributions of the actor-critic policies, by action space.

Each distribution is parametrised by one float32 ``inputs [B, num_inputs]`` row per
observation: what the policy network outputs and what rollout workers record as the
``action_dist_inputs`` column (so PPO can report KL(pi_old || pi) from the batch).

* ``Discrete(n)``: ``Categorical`` over ``softmax(logits)``, ``num_inputs = n``; actions
  int64 ``[B]``.
* ``MultiDiscrete(nvec)``: one independent ``Categorical`` per component,
  ``num_inputs = sum(nvec)``; actions int64 ``[B, len(nvec)]``.
* ``Box(shape=(D,))``: ``DiagGaussian``, a diagonal Gaussian with inputs
  ``[mean (D), log_std (D)]`` (as RLlib's ``DiagGaussian``), ``num_inputs = 2 D``; actions
  float32 ``[B, D]``. Samples are *not* clipped here: log-probabilities are those of the
  unclipped sample, which is what the batch keeps and the loss sees; rollout workers clip
  a copy to the space's bounds only to step the env (as RLlib and SB3 do).

Torch side (losses): ``dist_class(space).from_inputs(inputs)`` gives an object with
``logp(actions) [B]``, ``entropy() [B]`` and ``kl(other) [B]`` (KL(self || other)), in
nats. Numpy side (rollout workers, few rows per step, where torch calls cost more than
the arithmetic): ``sample(inputs, rng)`` and ``mode(inputs)`` give
``(actions, logp float32 [B])``.

Gaussian formulas (per dimension, summed over the D dimensions):
``log N(a; mu, sigma) = -((a - mu) / sigma)^2 / 2 - log sigma - log(2 pi) / 2``,
``H = log sigma + log(2 pi e) / 2``,
``KL(p || q) = log(sigma_q / sigma_p) + (sigma_p^2 + (mu_p - mu_q)^2) / (2 sigma_q^2) - 1/2``.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

# Torch-free, so that a rollout worker sampling with numpy shares them (re-exported here).
from plangraph.rl.action_layout import action_layout
from plangraph.rl.numpy_policy import log_softmax, sample_categorical

__all__ = [
    "ActionDistribution",
    "Categorical",
    "DiagGaussian",
    "MultiCategorical",
    "action_layout",
    "dist_class",
    "log_softmax",
    "sample_categorical",
]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class ActionDistribution(Protocol):
    """A batch of action distributions (torch, differentiable)."""

    def logp(self, actions: torch.Tensor) -> torch.Tensor: ...
    def entropy(self) -> torch.Tensor: ...
    def kl(self, other: Any) -> torch.Tensor: ...


class Categorical:
    """``softmax(logits)`` over ``n`` actions; ``logits`` float32 ``[B, n]``."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logp_all = torch.log_softmax(logits, dim=-1)

    @classmethod
    def from_inputs(cls, inputs: torch.Tensor) -> Categorical:
        return cls(inputs)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """``log pi(a)``: float32 ``[B]`` for int actions ``[B]``."""
        return self.logp_all.gather(1, actions.long().unsqueeze(1)).squeeze(1)

    def entropy(self) -> torch.Tensor:
        """``H(pi)``: float32 ``[B]``."""
        return -(self.logp_all.exp() * self.logp_all).sum(-1)

    def kl(self, other: Categorical) -> torch.Tensor:
        """``KL(self || other)``: float32 ``[B]``."""
        return (self.logp_all.exp() * (self.logp_all - other.logp_all)).sum(-1)

    @staticmethod
    def sample(inputs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return sample_categorical(inputs, rng)

    @staticmethod
    def mode(inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        actions = inputs.argmax(axis=1).astype(np.int64)
        return actions, log_softmax(inputs)[np.arange(actions.shape[0]), actions]


class MultiCategorical:
    """Independent categoricals over the components of a ``MultiDiscrete(nvec)``."""

    nvec: tuple[int, ...] = ()

    def __init__(self, inputs: torch.Tensor) -> None:
        self.parts = [Categorical(x) for x in torch.split(inputs, list(self.nvec), dim=-1)]

    @classmethod
    def of(cls, nvec: tuple[int, ...]) -> type[MultiCategorical]:
        return type(f"MultiCategorical{list(nvec)}", (cls,), {"nvec": tuple(nvec)})

    @classmethod
    def from_inputs(cls, inputs: torch.Tensor) -> MultiCategorical:
        return cls(inputs)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """``sum_k log pi_k(a_k)``: float32 ``[B]`` for int actions ``[B, K]``."""
        return torch.stack([p.logp(actions[:, k]) for k, p in enumerate(self.parts)]).sum(0)

    def entropy(self) -> torch.Tensor:
        return torch.stack([p.entropy() for p in self.parts]).sum(0)

    def kl(self, other: MultiCategorical) -> torch.Tensor:
        return torch.stack([p.kl(q) for p, q in zip(self.parts, other.parts, strict=True)]).sum(0)

    @classmethod
    def _split(cls, inputs: np.ndarray) -> list[np.ndarray]:
        return np.split(inputs, np.cumsum(cls.nvec)[:-1], axis=1)

    @classmethod
    def sample(cls, inputs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        draws = [sample_categorical(x, rng) for x in cls._split(inputs)]
        actions = np.stack([a for a, _ in draws], axis=1)
        return actions, np.sum([lp for _, lp in draws], axis=0).astype(np.float32)

    @classmethod
    def mode(cls, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        modes = [Categorical.mode(x) for x in cls._split(inputs)]
        actions = np.stack([a for a, _ in modes], axis=1)
        return actions, np.sum([lp for _, lp in modes], axis=0).astype(np.float32)


class DiagGaussian:
    """Diagonal Gaussian; ``inputs`` float32 ``[B, 2 D]`` = ``[mean, log_std]``."""

    def __init__(self, mean: torch.Tensor, log_std: torch.Tensor) -> None:
        self.mean = mean
        self.log_std = log_std

    @classmethod
    def from_inputs(cls, inputs: torch.Tensor) -> DiagGaussian:
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        return cls(mean, log_std)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """``log N(a; mean, diag(std^2))``: float32 ``[B]`` for actions ``[B, D]``."""
        z = (actions.float() - self.mean) * torch.exp(-self.log_std)
        return (-0.5 * z * z - self.log_std - _HALF_LOG_2PI).sum(-1)

    def entropy(self) -> torch.Tensor:
        return (self.log_std + 0.5 + _HALF_LOG_2PI).sum(-1)

    def kl(self, other: DiagGaussian) -> torch.Tensor:
        var, other_var = torch.exp(2.0 * self.log_std), torch.exp(2.0 * other.log_std)
        return (
            other.log_std
            - self.log_std
            + (var + (self.mean - other.mean) ** 2) / (2.0 * other_var)
            - 0.5
        ).sum(-1)

    @staticmethod
    def sample(inputs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        mean, log_std = np.split(inputs, 2, axis=1)
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        actions = mean + np.exp(log_std) * eps
        logp = (-0.5 * eps * eps - log_std - np.float32(_HALF_LOG_2PI)).sum(axis=1)
        return actions.astype(np.float32, copy=False), logp.astype(np.float32, copy=False)

    @staticmethod
    def mode(inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, log_std = np.split(inputs, 2, axis=1)
        logp = (-log_std - np.float32(_HALF_LOG_2PI)).sum(axis=1)
        return np.ascontiguousarray(mean, dtype=np.float32), logp.astype(np.float32)


DistClass = type[Categorical] | type[MultiCategorical] | type[DiagGaussian]


def dist_class(action_space: gym.Space[Any]) -> DistClass:
    """The distribution class for ``action_space``.

    Raises:
        ValueError: a space other than ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box``.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return Categorical
    if isinstance(action_space, gym.spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        return MultiCategorical.of(tuple(int(n) for n in action_space.nvec))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return DiagGaussian
    raise ValueError(
        f"no action distribution for {action_space}: actor-critic policies act in Discrete, "
        "1-D MultiDiscrete and 1-D Box action spaces"
    )
