"""A2C (synchronous advantage actor-critic, Mnih et al. 2016) minimises, over a batch of
``B`` rows, exactly one optimizer step per train batch:

    L = -mean_i[ log pi(a_i|s_i) * A_i ]                  (policy gradient, eq. of REINFORCE
                                                            with a value baseline)
        + vf_loss_coeff * mean_i[ (V(s_i) - G_i)^2 ]      (value regression on value_targets)
        - entropy_coeff * mean_i[ H(pi(.|s_i)) ]          (entropy bonus)

``A_i`` are the GAE(lambda) advantages of the batch (standardised per train batch when
``normalize_advantages``), ``G_i`` the lambda-returns ``value_targets``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from plangraph.algorithms.a2c.config import A2CConfig
from plangraph.rl.actor_critic import ActorCriticPolicy, explained_variance
from plangraph.rl.advantage_norm import AdvantageNormTerms
from plangraph.rl.policy import Stats
from plangraph.rl.postprocessing import Fragment, gae_columns
from plangraph.rl.sample_batch import SampleBatch

__all__ = ["A2CPolicy"]

_SB = SampleBatch


class A2CPolicy(ActorCriticPolicy[A2CConfig]):
    """A2C (Mnih et al. 2016, synchronous): loss in the module docstring."""

    config_type = A2CConfig

    loss_columns = (_SB.OBS, _SB.ACTIONS, _SB.ADVANTAGES, _SB.VALUE_TARGETS)

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """GAE(lambda) advantages and value targets (``gae_columns``)."""
        return gae_columns(fragment, self.compute_values, self.config.gamma, self.config.gae_lambda)

    def _forward(
        self, t: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp [B], raw advantages [B], mean entropy, values [B], value targets [B])``."""
        inputs, values = self.model.pi_vf(t[_SB.OBS])
        dist = self.dist(inputs)
        logp = dist.log_prob(t[_SB.ACTIONS])
        entropy = dist.entropy().mean()
        return logp, t[_SB.ADVANTAGES].float(), entropy, values, t[_SB.VALUE_TARGETS].float()

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        logp, adv, entropy, values, targets = self._forward(t)
        if cfg.normalize_advantages:
            adv = self._normalize(adv)
        policy_loss = -(logp * adv).mean()
        vf_loss = torch.mean((values - targets) ** 2)
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        if not with_stats:
            return total, {}
        return total, {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "entropy": entropy.item(),
            "vf_explained_var": explained_variance(values.detach(), targets),
        }

    def advantage_norm_terms(self, batch: SampleBatch) -> AdvantageNormTerms | None:
        """The split gradient of ``batch`` (``plangraph.rl.advantage_norm``) when
        ``normalize_advantages`` is set, so ``AverageGradients`` can standardise the
        advantages by the statistics of the whole train batch rather than of each
        microbatch; ``None`` otherwise (the plain per-row-mean gradients then average
        exactly by rows).

        Raises:
            KeyError: the batch lacks a loss column.
        """
        if not self.config.normalize_advantages:
            return None
        cfg = self.config
        logp, adv, entropy, values, targets = self._forward(self.tensors(batch))
        rest = cfg.vf_loss_coeff * torch.mean((values - targets) ** 2) - cfg.entropy_coeff * entropy
        parts = [
            self.param_grads(loss, retain)
            for loss, retain in (
                (rest, True),
                (-(logp * adv).mean(), True),
                (-logp.mean(), False),
            )
        ]
        raw = adv.detach().cpu().numpy().astype(np.float64)
        mean = float(raw.mean()) if raw.size else 0.0
        return AdvantageNormTerms(
            rest=parts[0],
            adv_weighted=parts[1],
            adv_unweighted=parts[2],
            count=int(raw.size),
            adv_mean=mean,
            adv_m2=float(((raw - mean) ** 2).sum()),
        )
