"""PG: REINFORCE with a learned value baseline (Williams 1992; Sutton & Barto 2018, sec.
13.4, "REINFORCE with Baseline"), as RLlib's PG, one optimizer step per train batch.

Postprocessing (on the rollout worker, per fragment; :func:`returns_to_go`) turns the
rewards into Monte-Carlo discounted returns to go ``G_t`` (Sutton & Barto 2018, eq. 3.9),
carried back over each episode's rows within the fragment:

    G_t = r_t + gamma * G_{t+1}           while row t + 1 is the next step of the episode
    G_t = r_t                             where the episode terminated at row t
    G_t = r_t + gamma * V(s_{t+1})        at a truncation (s_{t+1}: the final observation)
                                          or at the fragment's cut (s_{t+1}: where sampling
                                          goes on)

so an episode cut by the fragment or a time limit bootstraps from the value head, never
from the next episode's rows (``value_targets``; the same numbers as ``gae_columns`` with
lambda = 1 gives as value targets). The loss over a batch of ``B`` rows is minus the
REINFORCE-with-baseline objective (Williams 1992, baseline ``b(s) = V(s)``; Sutton & Barto
2018, eq. 13.11) plus the baseline's regression:

    A_i = G_i - V(s_i)                                     (no gradient through V here)
    L   = -mean_i[ log pi(a_i|s_i) * A_i ]                  (A_i standardised over the
                                                             batch when normalize_advantages)
          + vf_loss_coeff * mean_i[ (V(s_i) - G_i)^2 ]      (the baseline's regression)
          - entropy_coeff * mean_i[ H(pi(.|s_i)) ]          (entropy bonus)

``V`` in ``A_i`` is the value head being trained (its value at loss time; with one step
per fresh batch that is the behaviour policy's). Standardised advantages are
``(A - mean(A)) / (std(A) + 1e-8)`` with the unbiased std, advantages used raw for fewer
than 2 rows (``plangraph.rl.AdvantageNormTerms``' convention, so that ``AverageGradients``
standardises microbatches by the whole train batch's statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from plangraph.algorithms.pg.config import PGConfig
from plangraph.rl import (
    ActorCriticPolicy,
    AdvantageNormTerms,
    Fragment,
    SampleBatch,
    Stats,
    compute_returns,
    explained_variance,
)

__all__ = ["PGPolicy", "returns_to_go", "standardized"]

_SB = SampleBatch

#: added to the std of the advantages before dividing (as ``AdvantageNormTerms``)
ADV_STD_EPS = 1e-8


def returns_to_go(
    fragment: Fragment, values: Callable[[np.ndarray], np.ndarray], gamma: float
) -> np.ndarray:
    """Monte-Carlo discounted returns to go of every row of a fragment (module docstring).

    Args:
        fragment: ``N`` sequences of ``T`` rows (``rewards`` float32 ``[N, T]``,
            ``terminateds`` bool ``[N, T]``, ``continues`` bool ``[N, T]``).
        values: the policy's ``V``: observations ``[B, *obs_shape]`` -> float32 ``[B]``;
            called once, on the successor observations of the rows where an episode was
            truncated or a sequence was cut (not at all when there is none).
        gamma: discount factor in ``[0, 1]``.

    Returns:
        float32 ``[N, T]``: ``G_t``, discounted reward-sum units.
    """
    cols = fragment.columns
    n, horizon = fragment.shape
    terminated = np.asarray(cols[_SB.TERMINATEDS], dtype=bool)
    bootstrap = np.zeros((n, horizon), dtype=np.float32)
    cut = ~fragment.continues & ~terminated
    if cut.any():
        bootstrap[cut] = np.asarray(values(fragment.next_obs_where(cut)), dtype=np.float32)
    returns = compute_returns(cols[_SB.REWARDS].T, bootstrap.T, fragment.continues.T, gamma)
    return np.ascontiguousarray(returns.T)


def standardized(adv: torch.Tensor) -> torch.Tensor:
    """``(adv - mean) / (std + 1e-8)`` over ``adv`` (float ``[B]``, unbiased std as
    ``torch.std``); ``adv`` itself when ``B < 2``."""
    if adv.numel() < 2:
        return adv
    return (adv - adv.mean()) / (adv.std() + ADV_STD_EPS)


class PGPolicy(ActorCriticPolicy[PGConfig]):
    """REINFORCE with a value baseline: returns to go and loss in the module docstring."""

    config_type = PGConfig

    loss_columns = (_SB.OBS, _SB.ACTIONS, _SB.VALUE_TARGETS)

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """``value_targets``: the returns to go ``G_t`` (:func:`returns_to_go`), float32
        ``[N, T]``."""
        return {_SB.VALUE_TARGETS: returns_to_go(fragment, self.compute_values, self.config.gamma)}

    def _forward(
        self, t: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp [B], raw advantages G - V [B] (detached), mean entropy, values [B],
        returns [B])``, float32."""
        inputs, values = self.model.pi_vf(t[_SB.OBS])
        dist = self.dist(inputs)
        logp = dist.log_prob(t[_SB.ACTIONS])
        entropy = dist.entropy().mean()
        returns = t[_SB.VALUE_TARGETS].float()
        return logp, (returns - values).detach(), entropy, values, returns

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        """The loss of the module docstring on one batch.

        Args:
            t: ``obs [B, *obs_shape]``, ``actions [B, *action_shape]``, ``value_targets``
                float32 ``[B]`` (the returns to go).
            with_stats: also return ``total_loss``, ``policy_loss``, ``vf_loss``,
                ``entropy`` (nats) and ``vf_explained_var``.

        Returns:
            ``(scalar loss, stats)``.

        Raises:
            KeyError: ``t`` lacks a loss column.
        """
        cfg = self.config
        logp, adv, entropy, values, returns = self._forward(t)
        if cfg.normalize_advantages:
            adv = standardized(adv)
        policy_loss = -(logp * adv).mean()
        vf_loss = torch.mean((values - returns) ** 2)
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        if not with_stats:
            return total, {}
        return total, {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "entropy": entropy.item(),
            "vf_explained_var": explained_variance(values.detach(), returns),
        }

    def advantage_norm_terms(self, batch: SampleBatch) -> AdvantageNormTerms | None:
        """With ``normalize_advantages``, the split gradient of ``batch``
        (``plangraph.rl.AdvantageNormTerms``: value and entropy terms, ``grad
        -mean[logp * A]``, ``grad -mean[logp]`` and the moments of the raw advantages
        ``A = G - V``), so that ``AverageGradients`` standardises the advantages of
        microbatches by the statistics of their whole train batch; ``None`` otherwise
        (plain per-row-mean gradients, which average exactly by rows).

        Raises:
            KeyError: the batch lacks a loss column.
        """
        cfg = self.config
        if not cfg.normalize_advantages:
            return None
        logp, adv, entropy, values, returns = self._forward(self.tensors(batch))
        rest = cfg.vf_loss_coeff * torch.mean((values - returns) ** 2) - cfg.entropy_coeff * entropy
        parts = [
            self.param_grads(loss, retain)
            for loss, retain in (
                (rest, True),
                (-(logp * adv).mean(), True),
                (-logp.mean(), False),
            )
        ]
        raw = adv.cpu().numpy().astype(np.float64)
        mean = float(raw.mean()) if raw.size else 0.0
        return AdvantageNormTerms(
            rest=parts[0],
            adv_weighted=parts[1],
            adv_unweighted=parts[2],
            count=int(raw.size),
            adv_mean=mean,
            adv_m2=float(((raw - mean) ** 2).sum()),
        )
