"""CQL: conservative Q-learning on top of SAC, for continuous actions.

Kumar et al. 2020, "Conservative Q-Learning for Offline Reinforcement Learning"
(arXiv:2006.04779), the CQL(H) variant (sec. 3.2, eq. 4) with the importance-sampled
logsumexp of appendix F, as RLlib's CQL. Everything SAC does (``plangraph.algorithms.sac.
policy``: the tanh-squashed actor, twin critics, target critics, entropy tuning) is kept;
the critics' loss gains a conservative term and the actor is first trained by behaviour
cloning.

Actions are ``y`` in [-1, 1]^D (SAC's unit box; the batch's env actions are mapped to it).
For a batch of ``B`` transitions ``(s, a, r, s')`` and ``N = num_actions``, each critic
``Q_j`` (``j`` = 1, 2) gets

    gap_j = min_q_weight * ( mean_i[ T * logsumexp_k( x_jik / T ) ] - mean_i[ Q_j(s_i, a_i) ] )

where, for each row ``i``, the ``3 N`` values ``x_jik`` are (appendix F: log sum_a exp Q
estimated by importance sampling, ``exp(Q(s, a)) / mu(a)`` for ``a ~ mu``)

    Q_j(s_i, u_k)   - log U(u_k),          u_k ~ U([-1, 1]^D),  log U = -D log 2
    Q_j(s_i, y'_k)  - log pi(y'_k | s'_i), y'_k ~ pi(. | s'_i)   (the policy at the next state)
    Q_j(s_i, y_k)   - log pi(y_k | s_i),   y_k ~ pi(. | s_i)

(the sampled actions and their log-probs carry no gradient; ``T = temperature``, 1 in the
paper). The constant ``-log(3 N)`` of the sample mean is left out, as RLlib and the
authors' code do (it moves no gradient; with the Lagrangian it shifts the threshold). The
critics' loss is SAC's, ``mean_i[ sum_j (Q_j(s, a) - target)^2 / 2 ]`` (its soft target
with the target critics), plus ``sum_j gap_j``: the paper's eq. 4 with its 1/2 on the
squared TD error.

With ``lagrangian`` (eq. 5), ``alpha' = clamp(exp(log_alpha'), 0, 1e6)`` multiplies each
``gap_j - lagrangian_thresh`` in the critics' loss instead, and is itself trained to
maximise it: ``L_alpha' = -alpha' * mean_j[ gap_j - lagrangian_thresh ]`` (gaps detached),
a fourth optimizer, ``alpha_prime``.

The actor: for its first ``bc_iters`` updates, behaviour cloning with SAC's entropy term,
``L_pi = mean_i[ alpha log pi(y~_i|s_i) - log pi(a_i|s_i) ]`` (``y~ ~ pi(.|s)``
reparametrised; ``a_i`` the dataset's action, clamped inside (-1, 1) by 1e-6 so that
``atanh`` is finite); then SAC's. The entropy temperature alpha is tuned as in SAC
throughout.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

from plangraph.algorithms.cql.config import CQLConfig
from plangraph.algorithms.sac.policy import SACModel, SACPolicy, q_values, squashed_sample
from plangraph.rl.policy import Stats
from plangraph.rl.sample_batch import SampleBatch

__all__ = ["CQLPolicy", "conservative_gap"]

_SB = SampleBatch
_ALPHA_PRIME_MAX = 1e6
_BC_EPS = 1e-6


def conservative_gap(
    q_uniform: torch.Tensor,
    q_curr: torch.Tensor,
    logp_curr: torch.Tensor,
    q_next: torch.Tensor,
    logp_next: torch.Tensor,
    q_data: torch.Tensor,
    action_dim: int,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The CQL(H) gap of each critic before its weight (module doc; Kumar et al. 2020,
    eq. 4 with appendix F's importance-sampled logsumexp).

    Args:
        q_uniform: ``Q_j(s_i, u_k)`` for uniform ``u_k`` in [-1, 1]^D, float32 ``[J, B, N]``.
        q_curr, logp_curr: ``Q_j(s_i, y_k)`` ``[J, B, N]`` and ``log pi(y_k|s_i)``
            ``[B, N]`` for ``y_k ~ pi(.|s_i)``.
        q_next, logp_next: ``Q_j(s_i, y'_k)`` ``[J, B, N]`` and ``log pi(y'_k|s'_i)``
            ``[B, N]`` for ``y'_k ~ pi(.|s'_i)``.
        q_data: ``Q_j(s_i, a_i)`` of the dataset's actions, ``[J, B]``.
        action_dim: ``D`` (the uniform density is ``2^-D``).
        temperature: ``T``.

    Returns:
        ``(gap, logsumexp)``: ``gap_j = mean_i[T logsumexp_k(x_jik / T)] - mean_i[q_data_ji]``,
        float32 ``[J]``, and the per-row ``T logsumexp`` ``[J, B]``.
    """
    log_uniform = -action_dim * math.log(2.0)
    x = torch.cat(
        [
            q_uniform - log_uniform,
            q_next - logp_next.unsqueeze(0),
            q_curr - logp_curr.unsqueeze(0),
        ],
        dim=-1,
    )  # [J, B, 3N]
    lse = temperature * torch.logsumexp(x / temperature, dim=-1)  # [J, B]
    return lse.mean(dim=1) - q_data.mean(dim=1), lse


class CQLPolicy(SACPolicy):
    """CQL(H) on SAC (module docstring); ``config``: :class:`CQLConfig`.

    ``get_state()`` adds the number of updates so far (it ends the behaviour-cloning
    warm-start, ``bc_iters``); with ``lagrangian``, the model holds ``log_alpha_prime``
    and a fourth optimizer, ``alpha_prime``, steps it.
    """

    config_type = CQLConfig

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: CQLConfig,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        super().__init__(observation_space, action_space, config, seed, device)
        #: updates so far (``compute_losses`` calls): the actor clones while < bc_iters
        self.num_updates = 0

    @property
    def cql_config(self) -> CQLConfig:
        """The config, with CQL's fields."""
        return cast(CQLConfig, self.config)

    def build_model(self) -> SACModel:
        """SAC's model, plus ``log_alpha_prime`` (a scalar) with ``lagrangian``."""
        model = super().build_model()
        cfg = self.cql_config
        if cfg.lagrangian:
            model.register_parameter(
                "log_alpha_prime",
                nn.Parameter(torch.tensor(math.log(cfg.initial_alpha_prime))),
            )
        return model

    def optimizer_params(self) -> dict[str, list[nn.Parameter]]:
        """SAC's three optimizers, and ``alpha_prime`` with the Lagrangian."""
        out = super().optimizer_params()
        if self.cql_config.lagrangian:
            out["alpha_prime"] = [self.model.get_parameter("log_alpha_prime")]
        return out

    def bc_log_prob(self, obs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``log pi(y|s)`` of given unit actions ``y [B, D]`` (clamped inside (-1, 1) by
        1e-6) at ``obs [B, obs_dim]``: float32 ``[B]`` (Haarnoja et al. 2018, eq. 26)."""
        mean, log_std = self.model.pi(obs)
        dist = TransformedDistribution(
            Independent(Normal(mean, torch.exp(log_std)), 1), [TanhTransform()]
        )
        return dist.log_prob(torch.clamp(y, -1.0 + _BC_EPS, 1.0 - _BC_EPS))

    def cql_gaps(
        self,
        obs: torch.Tensor,
        next_obs: torch.Tensor,
        q_data: torch.Tensor,
        uniform: torch.Tensor,
        eps_curr: torch.Tensor,
        eps_next: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``conservative_gap`` of the online critics for given draws.

        Args:
            obs, next_obs: ``[B, obs_dim]``.
            q_data: ``Q_j(s, a)`` of the dataset's actions, ``[J, B]``.
            uniform: ``u`` in [-1, 1]^D, float32 ``[B, N, D]``.
            eps_curr, eps_next: standard normal noise ``[B, N, D]`` of the policy's draws
                at ``s`` and at ``s'`` (``y = tanh(mean + std * eps)``).

        Returns:
            ``(gap [J], logsumexp [J, B])``, before ``min_q_weight``.
        """
        b, n, d = uniform.shape
        m = self.model
        obs_n = obs.repeat_interleave(n, dim=0)  # [B N, obs_dim], row i*N + k
        with torch.no_grad():
            y_curr, logp_curr = squashed_sample(*m.pi(obs_n), eps_curr.reshape(b * n, d))
            next_n = next_obs.repeat_interleave(n, dim=0)
            y_next, logp_next = squashed_sample(*m.pi(next_n), eps_next.reshape(b * n, d))
        # One forward pass of each critic over the 3 N actions of every row.
        q = q_values(
            m.critics(),
            torch.cat([obs_n, obs_n, obs_n]),
            torch.cat([uniform.reshape(b * n, d), y_curr, y_next]),
        ).reshape(-1, 3, b, n)  # [J, 3, B, N]
        return conservative_gap(
            q[:, 0],
            q[:, 1],
            logp_curr.reshape(b, n),
            q[:, 2],
            logp_next.reshape(b, n),
            q_data,
            d,
            self.cql_config.temperature,
        )

    def compute_losses(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[dict[str, torch.Tensor], Stats]:
        """SAC's losses, the critics' with the conservative term, the actor's behaviour
        cloning while ``num_updates < bc_iters`` (module doc)."""
        cfg, m = self.cql_config, self.model
        losses, stats = super().compute_losses(t, with_stats)
        obs, next_obs = t[_SB.OBS], t[_SB.NEXT_OBS]
        y_data = self.to_unit(t[_SB.ACTIONS])
        q_data = q_values(m.critics(), obs, y_data)  # [J, B]
        b, d, n = int(obs.shape[0]), int(y_data.shape[-1]), cfg.num_actions
        gen = self.generator
        uniform = torch.rand((b, n, d), generator=gen) * 2.0 - 1.0
        eps_curr = torch.randn((b, n, d), generator=gen)
        eps_next = torch.randn((b, n, d), generator=gen)
        gap, lse = self.cql_gaps(obs, next_obs, q_data, uniform, eps_curr, eps_next)
        gap = cfg.min_q_weight * gap  # [J]
        if cfg.lagrangian:
            log_alpha_prime = m.get_parameter("log_alpha_prime")
            alpha_prime = torch.clamp(log_alpha_prime.exp(), 0.0, _ALPHA_PRIME_MAX)
            excess = gap - cfg.lagrangian_thresh
            cql_loss = (alpha_prime.detach() * excess).sum()
            losses["alpha_prime"] = -(alpha_prime * excess.detach()).mean()
        else:
            cql_loss = gap.sum()
        losses["critic"] = losses["critic"] + cql_loss
        cloning = self.num_updates < cfg.bc_iters
        if cloning:
            alpha = m.log_alpha.exp().detach()
            _y, logp = self.sample(obs)
            losses["actor"] = (alpha * logp - self.bc_log_prob(obs, y_data)).mean()
        self.num_updates += 1
        if not with_stats:
            return losses, stats
        stats.update(
            {
                "actor_loss": losses["actor"].item(),
                "cql_loss": cql_loss.item(),
                "cql_gap": gap.mean().item(),
                "cql_logsumexp": lse.mean().item(),
                "q_data": q_data.mean().item(),
                "bc_phase": float(cloning),
            }
        )
        if cfg.lagrangian:
            stats["alpha_prime"] = float(alpha_prime.detach())
            stats["alpha_prime_loss"] = losses["alpha_prime"].item()
        return losses, stats

    # --- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["num_updates"] = int(self.num_updates)
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        self.num_updates = int(np.asarray(state.get("num_updates", 0)))
