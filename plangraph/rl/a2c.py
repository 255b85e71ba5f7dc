"""Actor-critic policies: the shared stochastic actor-critic and A2C.

A2C (synchronous advantage actor-critic, Mnih et al. 2016) minimises, over a batch of
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
from typing import TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import Distribution

from plangraph.ops.models import MLPModel
from plangraph.ops.policies import A2CConfig, APPOConfig, IMPALAConfig, PPOConfig
from plangraph.rl.action_layout import action_layout
from plangraph.rl.advantage_norm import AdvantageNormTerms
from plangraph.rl.distributions import action_distribution, action_sampler
from plangraph.rl.models import ActorCritic, EncoderActorCritic, build_encoder
from plangraph.rl.policy import Stats, TorchPolicy, inference
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch

ActorCriticConfig = A2CConfig | PPOConfig | IMPALAConfig | APPOConfig
"""The config models of the stochastic actor-critic policies."""
ActorCriticConfigT = TypeVar("ActorCriticConfigT", bound=ActorCriticConfig, covariant=True)


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var[target - pred] / Var[target]`` (1 = perfect; <= 0 = no better than a mean)."""
    var = torch.var(target)
    if float(var) == 0.0:
        return 0.0
    return float(1.0 - torch.var(target - pred) / var)


class ActorCriticPolicy(TorchPolicy[ActorCriticConfigT]):
    """Stochastic policy ``pi(a|s)`` plus a state-value head ``V(s)``.

    The action distribution follows the action space (``plangraph.rl.distributions``,
    ``torch.distributions``): categorical for ``Discrete``, one categorical per component
    for ``MultiDiscrete``, a diagonal Gaussian for a 1-D ``Box``.
    """

    model: ActorCritic | EncoderActorCritic

    def _build_model(self) -> ActorCritic | EncoderActorCritic:
        self._dist = action_distribution(self.action_space)
        self._sample = action_sampler(self.action_space)
        self.action_shape, self.action_dtype, self.num_dist_inputs = action_layout(
            self.action_space
        )
        box = isinstance(self.action_space, gym.spaces.Box)
        gaussian_dim = self.action_shape[0] if box else 0
        cfg = self.config
        obs_shape = tuple(self.observation_space.shape)
        model = cfg.resolved_model(obs_shape)
        if isinstance(model, MLPModel) and not model.vf_share_layers:
            return ActorCritic(
                self.obs_dim,
                self.num_dist_inputs,
                model.hiddens,
                model.activation,
                gaussian_dim=gaussian_dim,
                free_log_std=cfg.free_log_std,
                log_std_init=cfg.log_std_init,
            )
        dtype = self.observation_space.dtype
        return EncoderActorCritic(
            lambda: build_encoder(model, obs_shape, dtype),
            self.num_dist_inputs,
            model.vf_share_layers,
            gaussian_dim=gaussian_dim,
            free_log_std=cfg.free_log_std,
            log_std_init=cfg.log_std_init,
        )

    def dist(self, inputs: torch.Tensor) -> Distribution:
        """The ``torch.distributions`` batch whose inputs (``model.pi(obs)``, float32
        ``[B, num_dist_inputs]``) are ``inputs``."""
        return self._dist(inputs)

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Sample (``explore``) or take the mode of ``pi(.|obs)``.

        Args:
            obs: ``[B, *obs_shape]`` observations (space dtype).

        Returns:
            ``(actions [B, *action_shape], {"action_logp": float32 [B],
            "action_dist_inputs": float32 [B, num_dist_inputs]})``; Box actions are the
            unclipped Gaussian samples.
        """
        with inference():
            inputs = self.model.pi(self.obs_tensor(obs))
            actions, logp = self._sample(inputs, self._action_rng if explore else None)
            return actions, {_SB.ACTION_LOGP: logp, _SB.ACTION_DIST_INPUTS: inputs.cpu().numpy()}

    def compute_values(self, obs: np.ndarray) -> np.ndarray:
        """``V(obs)``: float32 ``[B]`` for observations ``[B, *obs_shape]``."""
        with inference():
            return self.model.vf(self.obs_tensor(obs)).cpu().numpy()

    @staticmethod
    def _normalize(adv: torch.Tensor) -> torch.Tensor:
        if adv.numel() < 2:
            return adv
        return (adv - adv.mean()) / (adv.std() + 1e-8)


class A2CPolicy(ActorCriticPolicy[A2CConfig]):
    """A2C (Mnih et al. 2016, synchronous): loss in the module docstring."""

    config_type = A2CConfig

    loss_columns = (_SB.OBS, _SB.ACTIONS, _SB.ADVANTAGES, _SB.VALUE_TARGETS)

    def _forward(
        self, t: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp [B], raw advantages [B], mean entropy, values [B], value targets [B])``."""
        inputs, values = self.model.pi_vf(t[_SB.OBS])
        dist = self.dist(inputs)
        logp = dist.log_prob(t[_SB.ACTIONS])
        entropy = dist.entropy().mean()
        return logp, t[_SB.ADVANTAGES].float(), entropy, values, t[_SB.VALUE_TARGETS].float()

    def _loss(
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
        logp, adv, entropy, values, targets = self._forward(self._tensors(batch))
        rest = cfg.vf_loss_coeff * torch.mean((values - targets) ** 2) - cfg.entropy_coeff * entropy
        parts = [
            self._param_grads(loss, retain)
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
