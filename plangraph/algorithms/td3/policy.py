"""TD3's learner: DDPG's (``plangraph.algorithms.ddpg.policy``) with its three changes.

Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods"
(arXiv:1802.09477), Algorithm 1. For a batch of transitions ``(s, a, r, s', terminated)``
(``y`` = actions in [-1, 1]^D, as in DDPG's module doc; ``k = n_steps`` per row with
n-step targets, else 1):

    eps    = clip(sigma~ * N(0, I), -c, c)            (target policy smoothing, eq. 15)
    y'     = clip(mu'(s') + eps, -1, 1)
    target = r + gamma^k (1 - terminated) min(Q'_1(s', y'), Q'_2(s', y'))  (clipped double
                                                                             Q, eq. 10)
    L_Q    = mean_i[ w_i ((Q_1(s, y) - target)^2 + (Q_2(s, y) - target)^2) ]
    L_mu   = -mean_i[ Q_1(s, mu(s)) ]       on every d-th update only (delayed, sec. 5.2)

``sigma~ = target_noise``, ``c = target_noise_clip`` (action half-ranges), ``d =
policy_delay``: ``compute_losses`` leaves the actor's loss out of the other updates, so its
optimizer does not step (nor do its Adam moments move). The paper also moves the target
networks on every d-th update only: the plan's ``UpdateTarget`` does, with ``freq = d *
train_batch_size`` env steps trained (``plans/td3.py``).

Written on the public learner API only, as a user's algorithm would be.
"""

from __future__ import annotations

import torch

from plangraph.algorithms.ddpg.policy import DeterministicActorCriticPolicy
from plangraph.algorithms.td3.config import TD3Config

__all__ = ["TD3Policy"]


class TD3Policy(DeterministicActorCriticPolicy[TD3Config]):
    """TD3 (module doc): twin critics, delayed actor updates, target policy smoothing;
    ``config``: :class:`~plangraph.algorithms.td3.TD3Config`. State, acting and
    exploration as DDPG's (:class:`~plangraph.algorithms.ddpg.policy.DDPGPolicy`)."""

    config_type = TD3Config
    num_critics = 2

    @property
    def policy_delay(self) -> int:
        """``config.policy_delay``: the actor steps on every d-th update."""
        return self.config.policy_delay

    def target_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """``clip(mu'(s') + clip(sigma~ * eps, -c, c), -1, 1)``, ``eps ~ N(0, I)`` from the
        policy's seeded generator: float32 ``[B, D]``."""
        y = self.target_model.act(next_obs)
        cfg = self.config
        if cfg.target_noise <= 0.0:
            return y
        eps = torch.randn(y.shape, generator=self.noise_generator, device=y.device)
        noise = torch.clamp(cfg.target_noise * eps, -cfg.target_noise_clip, cfg.target_noise_clip)
        return torch.clamp(y + noise, -1.0, 1.0)
