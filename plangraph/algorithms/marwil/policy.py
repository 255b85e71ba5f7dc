"""MARWIL's learner (Wang et al. 2018, "Exponentially Weighted Imitation Learning for
Batched Historical Data", NeurIPS; as RLlib's MARWIL).

On a batch of ``B`` recorded rows with discounted returns to go ``R_i`` (the ``returns``
column ``ReadExperiences`` adds, with this policy's ``gamma``):

    A_i  = R_i - V(s_i)                                  (no gradient through V here)
    c^2 <- c^2 + rate * (mean_i[A_i^2] - c^2)            (moving average, per train batch)
    w_i  = min(exp(beta * A_i / (sqrt(c^2) + 1e-8)), max_weight)
    L    = -mean_i[ w_i * log pi(a_i|s_i) ] + vf_coeff * 0.5 * mean_i[ (V(s_i) - R_i)^2 ]

``beta = 0`` gives ``w_i = 1`` and behaviour cloning; the value term is then left out (BC
reads no ``returns``). Sampled online (a plan with ``ParallelRollouts``), a fragment's
``returns`` are its returns to go as PG computes them (bootstrapped from ``V`` where a
fragment or a time limit cuts an episode; ``plangraph.algorithms.pg.policy.returns_to_go``).
``c^2`` is a buffer of the model (``ma_adv_norm``), so it travels
with the weights and is saved in checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from plangraph.algorithms.marwil.config import MARWILConfig
from plangraph.algorithms.pg.policy import returns_to_go
from plangraph.rl import ActorCriticPolicy, Fragment, SampleBatch, Stats, explained_variance

__all__ = ["MARWILPolicy"]

_SB = SampleBatch
RETURNS = "returns"


class MARWILPolicy(ActorCriticPolicy[MARWILConfig]):
    """MARWIL (BC with ``beta = 0``): the loss of the module docstring."""

    config_type = MARWILConfig
    loss_columns: tuple[str, ...] = (_SB.OBS, _SB.ACTIONS, RETURNS)

    def build_model(self) -> Any:
        """The actor-critic model, plus buffer ``ma_adv_norm`` (float32 scalar: ``c^2``)."""
        model = super().build_model()
        start = float(self.config.moving_average_sqd_adv_norm_start)
        model.register_buffer("ma_adv_norm", torch.tensor(start, dtype=torch.float32))
        return model

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """``returns`` (float32 ``[N, T]``) of a sampled fragment: returns to go,
        bootstrapped from ``V`` at a cut or a truncation (as PG's)."""
        return {RETURNS: returns_to_go(fragment, self.compute_values, self.config.gamma)}

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        """The loss of the module docstring on one batch.

        Args:
            t: ``obs [B, *obs_shape]``, ``actions [B, *action_shape]`` and (``beta > 0``)
                ``returns`` float32 ``[B]``.
            with_stats: also return ``total_loss``, ``policy_loss``, ``vf_loss``,
                ``mean_weight``, ``ma_adv_norm`` and ``vf_explained_var``.

        Returns:
            ``(scalar loss, stats)``.

        Raises:
            KeyError: ``t`` lacks a loss column.
        """
        cfg = self.config
        if cfg.beta == 0.0:
            dist = self.dist(self.model.pi(t[_SB.OBS]))
            logp = dist.log_prob(t[_SB.ACTIONS])
            policy_loss = -logp.mean()
            if not with_stats:
                return policy_loss, {}
            return policy_loss, {
                "total_loss": policy_loss.item(),
                "policy_loss": policy_loss.item(),
                "entropy": dist.entropy().mean().item(),
            }
        inputs, values = self.model.pi_vf(t[_SB.OBS])
        logp = self.dist(inputs).log_prob(t[_SB.ACTIONS])
        returns = t[RETURNS].float()
        adv = (returns - values).detach()
        ma: Any = self.model.ma_adv_norm  # float32 scalar buffer
        with torch.no_grad():
            ma += cfg.moving_average_sqd_adv_norm_update_rate * (torch.mean(adv**2) - ma)
        weights = torch.exp(cfg.beta * adv / (torch.sqrt(ma) + 1e-8)).clamp(max=cfg.max_weight)
        policy_loss = -(weights * logp).mean()
        vf_loss = 0.5 * torch.mean((values - returns) ** 2)
        total = policy_loss + cfg.vf_coeff * vf_loss
        if not with_stats:
            return total, {}
        return total, {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "mean_weight": weights.mean().item(),
            "ma_adv_norm": float(ma.item()),
            "vf_explained_var": explained_variance(values.detach(), returns),
        }
