"""APPO: V-trace advantages in the PPO clipped surrogate against a target network.

Follows RLlib 1.x ``ppo/appo_torch_policy.py`` (``build_appo_surrogate_loss`` with
``vtrace=True``, and ``UpdateTargetAndKL`` in ``ppo/appo.py``). Three policies meet:
the behaviour policy ``mu`` (``action_logp``, recorded by the rollout worker), the target
network ``pi_old`` (the "old" policy of PPO, refreshed by ``update_target()``) and the
online network ``pi`` being trained. Per (mini)batch of whole segments (the segment
handling and minibatching of ``VTracePolicy``, shared with ``IMPALAPolicy``):

    v_s, A_s = vtrace(log mu, log pi_old, ...)     V-trace with pi_old as its target policy
                                                   (Espeholt et al. 2018, eq. 1, sec. 4.2);
                                                   values and bootstrap values from the
                                                   online value function, as RLlib
    w_s      = clip(mu / pi_old, 0, 2) * pi / mu   (= pi / pi_old where the clip is idle)
    L_clip   = -mean_s[ min(w_s A_s, clip(w_s, 1 - eps, 1 + eps) A_s) ]   eps = clip_param
                                                   (Schulman et al. 2017, eq. 7)
    L_vf     = mean_s[ 0.5 * (v_s - V(x_s))^2 ]
    KL       = mean_s[ KL(pi_old(.|x_s) || pi(.|x_s)) ]
    L        = L_clip + vf_loss_coeff * L_vf - entropy_coeff * mean_s[ H(pi) ]
               (+ kl_coeff * KL when use_kl_loss)

So behaviour log-probs weight the V-trace (the correction for the actors' lag) and the
target network anchors the surrogate (PPO's trust region). ``v_s``, ``A_s`` and ``w_s``'s
first factor are constants of the loss. As in ``IMPALAPolicy`` the terms are row means
(RLlib's APPO uses masked means too).

``update_target()`` copies the online network into the target network and, when
``use_kl_loss``, adapts ``kl_coeff`` from the KL of the most recent learner step (x1.5
above ``2 * kl_target``, x0.5 below ``kl_target / 2``; RLlib's ``KLCoeffMixin.update_kl``
called by ``UpdateTargetAndKL``). The plan calls it every ``target_update_freq`` env steps
trained.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch.distributions import kl_divergence

from plangraph.algorithms.appo.config import APPOConfig
from plangraph.algorithms.impala.policy import (
    VTracePolicy,
    importance_ratio_stats,
    vf_explained_variance,
)
from plangraph.rl.models import ActorCritic, EncoderActorCritic, soft_update
from plangraph.rl.policy import Stats
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch


class APPOPolicy(VTracePolicy[APPOConfig]):
    """APPO policy: online actor-critic plus a target actor-critic; loss in the module doc.

    Batch columns as ``VTracePolicy``. ``get_weights()``/``set_weights()`` carry the online
    network only (what rollout workers act with); ``get_state()`` adds the target network
    and the current ``kl_coeff``.
    """

    config_type = APPOConfig

    def build_model(self) -> ActorCritic | EncoderActorCritic:
        model = super().build_model()
        self.target_model = copy.deepcopy(model)
        for p in self.target_model.parameters():
            p.requires_grad_(False)
        self.kl_coeff = float(self.config.kl_coeff)
        self._last_kl: float | None = None
        return model

    def update_target(self, tau: float = 1.0) -> None:
        """Copy the online network into the target network (``tau < 1``: move it that
        fraction of the way); adapt ``kl_coeff`` (module doc)."""
        if tau >= 1.0:
            self.target_model.load_state_dict(self.model.state_dict())
        else:
            soft_update(self.target_model, self.model, tau)
        if self.config.use_kl_loss and self._last_kl is not None:
            self.update_kl(self._last_kl)
        self._last_kl = None

    def update_kl(self, sampled_kl: float) -> float:
        """Adapt ``kl_coeff`` to a measured KL (nats per row); returns the new coefficient."""
        if sampled_kl > 2.0 * self.config.kl_target:
            self.kl_coeff *= 1.5
        elif sampled_kl < 0.5 * self.config.kl_target:
            self.kl_coeff *= 0.5
        return self.kl_coeff

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        obs, actions = t[_SB.OBS], t[_SB.ACTIONS]
        inputs, values = self.model.pi_vf(obs)
        dist = self.dist(inputs)
        logp = dist.log_prob(actions)
        behaviour_logp = t[_SB.ACTION_LOGP].float()
        with torch.no_grad():
            old_dist = self.dist(self.target_model.pi(obs))
            old_logp = old_dist.log_prob(actions)
            is_ratio = torch.clamp(torch.exp(behaviour_logp - old_logp), 0.0, 2.0)
        vt = self._vtrace(t, old_logp, values)
        adv = vt.pg_advantages
        ratio = is_ratio * torch.exp(logp - behaviour_logp)
        surrogate = torch.min(
            ratio * adv, torch.clamp(ratio, 1.0 - cfg.clip_param, 1.0 + cfg.clip_param) * adv
        )
        policy_loss = -surrogate.mean()
        vf_loss = 0.5 * torch.mean((vt.vs - values) ** 2)
        entropy = dist.entropy().mean()
        kl = kl_divergence(old_dist, dist).mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        if cfg.use_kl_loss:
            total = total + self.kl_coeff * kl
        if not with_stats:
            return total, {}
        self._last_kl = kl.item()
        with torch.no_grad():
            clip_frac = ((ratio - 1.0).abs() > cfg.clip_param).float().mean()
        return total, {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "entropy": entropy.item(),
            "kl": self._last_kl,
            "kl_coeff": self.kl_coeff,
            "clip_frac": clip_frac.item(),
            "vf_explained_var": vf_explained_variance(values.detach(), vt.vs),
            **importance_ratio_stats(vt, cfg.vtrace_clip_rho_threshold),
        }

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["kl_coeff"] = self.kl_coeff
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        self.kl_coeff = float(state["kl_coeff"])
        self._last_kl = None
