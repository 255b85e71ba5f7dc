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

Acting (rollout workers, a few rows per vector step, where each torch call costs more than
its arithmetic): ``action_sampler(action_space)`` gives the function
``(inputs, rng) -> (actions, logp float32 [B])`` (numpy) that draws one action per row
with the policy's seeded ``numpy.random.Generator`` from torch's outputs: the inverse CDF
of ``softmax(logits)`` at one uniform per row for each categorical, its log-prob read from
torch's ``log_softmax`` (what ``Categorical.log_prob`` computes); ``mean + std * eps``
with standard normal ``eps`` for the Gaussian, its log-prob the ``Normal``'s own
``log_prob``; ``rng=None`` takes the mode. Not torch's ``sample()``, which draws from
torch's global RNG: the policy's generator gives each worker its own stream from the run
seed, never disturbs another user of torch's RNG, and its state is plain data a
checkpoint holds (``TorchPolicy.get_sampling_state``).
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
    "action_sampler",
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

    def sample(
        self,
        sample_shape: torch.Size | list[int] | tuple[int, ...] = torch.Size(),  # noqa: B008
    ) -> torch.Tensor:
        return torch.stack([p.sample(sample_shape) for p in self.parts], dim=-1)


@register_kl(MultiCategorical, MultiCategorical)
def _kl_multi_categorical(p: MultiCategorical, q: MultiCategorical) -> torch.Tensor:
    return torch.stack([kl_divergence(a, b) for a, b in zip(p.parts, q.parts, strict=True)]).sum(0)


def _normal(inputs: torch.Tensor, validate_args: bool | None) -> Normal:
    """The per-dimension ``Normal(mean, exp(log_std))`` of inputs ``[mean, log_std]``."""
    mean, log_std = torch.chunk(inputs, 2, dim=-1)
    return Normal(mean, log_std.exp(), validate_args=validate_args)


def _diag_gaussian(inputs: torch.Tensor, validate_args: bool | None) -> Independent:
    return Independent(_normal(inputs, validate_args), 1)


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


ActionSampler = Callable[[torch.Tensor, np.random.Generator | None], tuple[np.ndarray, np.ndarray]]
"""``(inputs float32 [B, num_inputs], rng or None for the mode) -> (actions, logp float32
[B])``, numpy; call it under ``torch.inference_mode()``."""


def _inverse_cdf(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One category per row of ``probs [B, n]`` (unnormalised): int64 ``[B]``."""
    cdf = np.cumsum(probs, axis=1)
    actions = (rng.random((probs.shape[0], 1)) * cdf[:, -1:] >= cdf).sum(axis=1)
    return np.minimum(actions, probs.shape[1] - 1).astype(np.int64, copy=False)


def _pick(logits: torch.Tensor, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """A category per row of ``logits [B, n]`` and its log-prob under ``softmax(logits)``."""
    logp_all = torch.log_softmax(logits, dim=-1).cpu().numpy()
    if rng is None:
        actions = logp_all.argmax(axis=1)
    else:
        actions = _inverse_cdf(np.exp(logp_all), rng)
    return actions, logp_all[np.arange(actions.shape[0]), actions]


def _sample_gaussian(
    inputs: torch.Tensor, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray]:
    base = _normal(inputs, validate_args=False)
    dist = Independent(base, 1)
    mean = base.loc.cpu().numpy()
    if rng is None:
        actions = np.array(mean, dtype=np.float32)
    else:
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        actions = (mean + base.scale.cpu().numpy() * eps).astype(np.float32, copy=False)
    logp = dist.log_prob(torch.from_numpy(actions).to(inputs.device))
    return actions, logp.cpu().numpy()


def action_sampler(action_space: gym.Space[Any]) -> ActionSampler:
    """The acting function for ``action_space`` (module doc): int64 actions ``[B]`` or
    ``[B, K]`` for categoricals, float32 ``[B, D]`` (unclipped) for the Gaussian.

    Raises:
        ValueError: a space other than ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box``.
    """
    action_layout(action_space)  # raises for the spaces no distribution serves
    if isinstance(action_space, gym.spaces.Discrete):
        return _pick
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        nvec = [int(n) for n in action_space.nvec]

        def sample_multi(
            inputs: torch.Tensor, rng: np.random.Generator | None
        ) -> tuple[np.ndarray, np.ndarray]:
            parts = [_pick(x, rng) for x in torch.split(inputs, nvec, dim=-1)]
            actions = np.stack([a for a, _ in parts], axis=1)
            return actions, np.asarray(np.sum([lp for _, lp in parts], axis=0, dtype=np.float32))

        return sample_multi
    return _sample_gaussian
