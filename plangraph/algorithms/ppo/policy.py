"""PPO with the clipped surrogate objective (Schulman et al. 2017, eq. 7 and 9).

Per minibatch, with ``r_i = exp(log pi(a_i|s_i) - action_logp_i)`` (behaviour log-prob
recorded by the rollout worker) and advantages ``A_i`` (standardised per minibatch when
``normalize_advantages``):

    L_clip = -mean_i[ min(r_i A_i, clip(r_i, 1 - eps, 1 + eps) A_i) ]      eps = clip_param
    L_vf   =  mean_i[ (V(s_i) - G_i)^2 ]                  or, with vf_clip_param = c,
              mean_i[ max((V - G)^2, (vf_preds + clip(V - vf_preds, -c, c) - G)^2) ]
    L      =  L_clip + vf_loss_coeff * L_vf - entropy_coeff * mean_i[ H(pi(.|s_i)) ]
              + kl_coeff * mean_i[ KL(pi_old(.|s_i) || pi(.|s_i)) ]   (only when the
                                                 config's kl_coeff > 0, as RLlib's PPO)

The KL penalty is RLlib 1.x PPO's (``ppo_torch_policy.py``; the adaptive KL penalty of
Schulman et al. 2017, sec. 4): ``pi_old`` is the behaviour distribution the rollout worker
recorded (``action_dist_inputs``). The policy's current coefficient ``kl_coeff`` starts at
the config's ``kl_coeff``, is adapted by the ``UpdateKL`` operator after each training step
(``update_kl``) and is saved in ``get_state()``; with the config's ``kl_coeff = 0`` (the
default) the loss is the clipped surrogate alone, bit for bit as without the term.

``train(batch, num_sgd_iter, sgd_minibatch_size)`` runs the epochs (``TorchPolicy.train``).
With a recurrent model (``docs/recurrent.md``) the minibatches are whole sequences and
the means are over their real (unpadded) rows.
The action distribution follows the action space (categorical, or a diagonal Gaussian
for Box actions: ``plangraph.rl.distributions``); ``log pi`` is that of the unclipped
action the batch holds. Reported: ``kl`` = mean KL(pi_old || pi) from the behaviour
distribution inputs ``action_dist_inputs``,
``clip_frac`` = fraction of rows with ``|r - 1| > eps``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import kl_divergence

from plangraph.algorithms.ppo.config import PPOConfig
from plangraph.rl.actor_critic import ActorCriticPolicy, explained_variance
from plangraph.rl.policy import Stats
from plangraph.rl.postprocessing import Fragment, gae_columns, recurrent_gae_columns
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch


class PPOPolicy(ActorCriticPolicy[PPOConfig]):
    """PPO-clip policy; loss in the module docstring."""

    config_type = PPOConfig

    loss_columns = (
        _SB.OBS,
        _SB.ACTIONS,
        _SB.ACTION_LOGP,
        _SB.ACTION_DIST_INPUTS,
        _SB.VF_PREDS,
        _SB.ADVANTAGES,
        _SB.VALUE_TARGETS,
    )

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: PPOConfig,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        super().__init__(observation_space, action_space, config, seed=seed, device=device)
        #: the current KL penalty coefficient (starts at ``config.kl_coeff``; ``update_kl``)
        self.kl_coeff = float(self.config.kl_coeff)

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt ``kl_coeff`` to the mean KL(pi_old || pi) of a training step (nats per
        row), as RLlib's ``KLCoeffMixin.update_kl``: x1.5 above ``2 * kl_target``, x0.5
        below ``kl_target / 2``, else unchanged. Returns the new coefficient."""
        if sampled_kl > 2.0 * self.config.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.config.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def get_state(self) -> dict[str, Any]:
        """``TorchPolicy.get_state()`` plus the current ``kl_coeff`` (a float)."""
        state = super().get_state()
        state["kl_coeff"] = self.kl_coeff
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()`` (a state saved before the KL penalty existed keeps the
        config's ``kl_coeff``)."""
        super().set_state(state)
        self.kl_coeff = float(state.get("kl_coeff", self.config.kl_coeff))

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """GAE(lambda) advantages and value targets (``gae_columns``; a recurrent model:
        ``recurrent_gae_columns``, from the values recorded while acting and bootstrap
        values from the state the worker held)."""
        if self.is_recurrent:
            return recurrent_gae_columns(
                fragment, self.compute_values_recurrent, self.config.gamma, self.config.gae_lambda
            )
        return gae_columns(fragment, self.compute_values, self.config.gamma, self.config.gae_lambda)

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        inputs, values = self.pi_vf(t)
        dist = self.dist(inputs)
        logp = dist.log_prob(t[_SB.ACTIONS])
        old_logp = t[_SB.ACTION_LOGP].float()
        adv = t[_SB.ADVANTAGES].float()
        if cfg.normalize_advantages:
            adv = self._normalize(adv)
        log_ratio = logp - old_logp
        ratio = torch.exp(log_ratio)
        surrogate = torch.min(
            ratio * adv, torch.clamp(ratio, 1.0 - cfg.clip_param, 1.0 + cfg.clip_param) * adv
        )
        policy_loss = -surrogate.mean()

        targets = t[_SB.VALUE_TARGETS].float()
        vf_err = (values - targets) ** 2
        if cfg.vf_clip_param is not None:
            old_v = t[_SB.VF_PREDS].float()
            clipped = old_v + torch.clamp(values - old_v, -cfg.vf_clip_param, cfg.vf_clip_param)
            vf_err = torch.max(vf_err, (clipped - targets) ** 2)
        vf_loss = vf_err.mean()

        total = policy_loss + cfg.vf_loss_coeff * vf_loss
        kl_penalty = cfg.kl_coeff > 0.0
        if kl_penalty:
            kl = kl_divergence(self.dist(t[_SB.ACTION_DIST_INPUTS].float()), dist).mean()
            total = total + self.kl_coeff * kl
        if cfg.entropy_coeff:
            entropy = dist.entropy().mean()
            total = total - cfg.entropy_coeff * entropy
        elif with_stats:
            # Reported, not trained on: outside the graph whose backward each update pays.
            with torch.no_grad():
                entropy = dist.entropy().mean()
        if not with_stats:
            return total, {}
        with torch.no_grad():
            if not kl_penalty:
                old_dist = self.dist(t[_SB.ACTION_DIST_INPUTS].float())
                kl = kl_divergence(old_dist, dist).mean()
            clip_frac = ((ratio - 1.0).abs() > cfg.clip_param).float().mean()
        stats = {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "entropy": entropy.item(),
            "kl": kl.item(),
            "clip_frac": clip_frac.item(),
            "vf_explained_var": explained_variance(values.detach(), targets),
        }
        if kl_penalty:
            stats["kl_coeff"] = self.kl_coeff
        return total, stats
