"""The stochastic actor-critic policy several algorithms share (A2C, PPO, IMPALA, APPO,
PG): ``pi(a|s)`` and a value head ``V(s)`` on a registered model's encoder, acting by
sampling from ``torch.distributions``, and GAE postprocessing (``gae_columns``) for the
algorithms that learn from advantages.
"""

from __future__ import annotations

from typing import TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import Distribution

from plangraph.ops.models import MLPModel
from plangraph.ops.policies import ActorCriticConfig
from plangraph.rl.action_layout import action_layout
from plangraph.rl.distributions import action_distribution, action_sampler
from plangraph.rl.models import ActorCritic, EncoderActorCritic, build_encoder
from plangraph.rl.policy import TorchPolicy, inference
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch

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

    def build_model(self) -> ActorCritic | EncoderActorCritic:
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
        # The built-in MLP with its own value network keeps the parameter names and
        # initialisation order runs trained before models were registered have.
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
        space = self.observation_space
        return EncoderActorCritic(
            lambda: build_encoder(model, space),
            self.num_dist_inputs,
            bool(getattr(model, "vf_share_layers", True)),
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
