"""Action distributions of the actor-critic policies, by action space: ``torch.distributions``.

Each distribution is parametrised by one float32 ``inputs [B, num_inputs]`` row per
observation: what the policy network outputs and what rollout workers record as the
``action_dist_inputs`` column (so PPO can report KL(pi_old || pi) from the batch).
``action_distribution(action_space)`` gives the function ``inputs -> distribution``:

* ``Discrete(n)``: ``Categorical(logits=inputs)``, ``num_inputs = n``; actions int64
  ``[B]``.
* ``MultiDiscrete(nvec)``: ``MultiCategorical``, one independent ``Categorical`` per
  component, ``num_inputs = sum(nvec)``; actions int64 ``[B, len(nvec)]``.
* ``Box(shape=(D,))``: ``Independent(Normal(mean, exp(log_std)), 1)``, a diagonal
  Gaussian with inputs ``[mean (D), log_std (D)]`` (as RLlib's ``DiagGaussian``),
  ``num_inputs = 2 D``; actions float32 ``[B, D]``. Samples are *not* clipped here:
  log-probabilities are those of the unclipped sample, which is what the batch keeps and
  the loss sees; rollout workers clip a copy to the space's bounds only to step the env
  (as RLlib and SB3 do).

Losses use the distributions' ``log_prob(actions) [B]``, ``entropy() [B]`` and
``torch.distributions.kl_divergence(p, q) [B]`` (nats).

Acting: ``draw(dist, rng)`` draws one action per row with numpy from the distribution's
parameters, with the policy's seeded ``numpy.random.Generator``: the inverse CDF of
``probs`` at one uniform per row for a categorical, ``mean + std * eps`` with standard
normal ``eps`` for the Gaussian. Not torch's ``sample()``, which draws from torch's
global RNG: the policy's generator gives each worker its own stream from the run seed,
never disturbs another user of torch's RNG, and its state is plain data a checkpoint
holds (``TorchPolicy.get_sampling_state``). The log-probability of a drawn action is the
distribution's own ``log_prob``, the function the loss uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import (
    Categorical,
    Distribution,
    Independent,
    Normal,
    constraints,
    kl_divergence,
    register_kl,
)

from plangraph.rl.action_layout import action_layout

__all__ = [
    "MultiCategorical",
    "action_distribution",
    "action_layout",
    "draw",
]

ActionDistribution = Callable[[torch.Tensor], Distribution]
"""``inputs float32 [B, num_inputs] -> `` the batch of ``B`` action distributions."""


class MultiCategorical(Distribution):
    """Independent ``Categorical`` distributions over the components of a
    ``MultiDiscrete(nvec)`` action: batch shape ``[B]``, event shape ``[len(nvec)]``.

    Args:
        logits: float32 ``[B, sum(nvec)]``, the components' logits side by side.
        nvec: the number of values of each component.
        validate_args: as ``torch.distributions.Distribution``.

    ``log_prob``, ``entropy`` and ``kl_divergence`` (registered with
    ``torch.distributions.register_kl``) are the sums over the components of their
    ``Categorical``'s.
    """

    arg_constraints: dict[str, constraints.Constraint] = {}  # checked by each component
    support = constraints.independent(constraints.nonnegative_integer, 1)

    def __init__(
        self, logits: torch.Tensor, nvec: tuple[int, ...], validate_args: bool | None = None
    ) -> None:
        self.nvec = tuple(int(n) for n in nvec)
        self.parts = [
            Categorical(logits=x, validate_args=validate_args)
            for x in torch.split(logits, list(self.nvec), dim=-1)
        ]
        super().__init__(
            logits.shape[:-1], torch.Size([len(self.nvec)]), validate_args=validate_args
        )

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``sum_k log pi_k(a_k)``: float32 ``[B]`` for int actions ``[B, K]``."""
        return torch.stack([p.log_prob(value[..., k]) for k, p in enumerate(self.parts)]).sum(0)

    def entropy(self) -> torch.Tensor:
        return torch.stack([p.entropy() for p in self.parts]).sum(0)

    @property
    def mode(self) -> torch.Tensor:
        return torch.stack([p.mode for p in self.parts], dim=-1)

    def sample(self, sample_shape: torch.Size = torch.Size()) -> torch.Tensor:  # noqa: B008
        return torch.stack([p.sample(sample_shape) for p in self.parts], dim=-1)


@register_kl(MultiCategorical, MultiCategorical)
def _kl_multi_categorical(p: MultiCategorical, q: MultiCategorical) -> torch.Tensor:
    return torch.stack([kl_divergence(a, b) for a, b in zip(p.parts, q.parts, strict=True)]).sum(0)


def _diag_gaussian(inputs: torch.Tensor, validate_args: bool | None) -> Distribution:
    mean, log_std = torch.chunk(inputs, 2, dim=-1)
    return Independent(Normal(mean, log_std.exp(), validate_args=validate_args), 1)


def action_distribution(
    action_space: gym.Space[Any], validate_args: bool | None = None
) -> ActionDistribution:
    """The function ``inputs -> distribution`` for ``action_space`` (module doc).

    ``validate_args`` is torch's: ``None`` checks the parameters (finite logits, a
    positive std) and the actions given to ``log_prob`` unless Python runs with ``-O``.

    Raises:
        ValueError: a space other than ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box``.
    """
    action_layout(action_space)  # raises for the spaces no distribution serves
    if isinstance(action_space, gym.spaces.Discrete):
        return lambda inputs: Categorical(logits=inputs, validate_args=validate_args)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in action_space.nvec)
        return lambda inputs: MultiCategorical(inputs, nvec, validate_args=validate_args)
    return lambda inputs: _diag_gaussian(inputs, validate_args)


def _inverse_cdf(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One category per row of ``probs [B, n]``: int64 ``[B]``."""
    cdf = np.cumsum(probs, axis=1)
    actions = (rng.random((probs.shape[0], 1)) * cdf[:, -1:] >= cdf).sum(axis=1)
    return np.minimum(actions, probs.shape[1] - 1).astype(np.int64, copy=False)


def draw(dist: Distribution, rng: np.random.Generator) -> np.ndarray:
    """One action per row of ``dist`` (``action_distribution``'s), drawn with numpy from
    its parameters and ``rng`` (module doc): int64 ``[B]`` or ``[B, K]`` for categoricals,
    float32 ``[B, D]`` (unclipped) for the Gaussian.

    Raises:
        TypeError: a distribution ``action_distribution`` does not build.
    """
    if isinstance(dist, Categorical):
        return _inverse_cdf(dist.probs.cpu().numpy(), rng)
    if isinstance(dist, MultiCategorical):
        return np.stack([_inverse_cdf(p.probs.cpu().numpy(), rng) for p in dist.parts], axis=1)
    if isinstance(dist, Independent) and isinstance(dist.base_dist, Normal):
        mean = dist.base_dist.loc.cpu().numpy()
        std = dist.base_dist.scale.cpu().numpy()
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        return (mean + std * eps).astype(np.float32, copy=False)
    raise TypeError(f"no numpy draw for {type(dist).__name__}")
