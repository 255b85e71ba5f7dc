"""SAC: soft actor-critic with twin Q-networks and automatic entropy tuning.

Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications" (arXiv:1812.05905),
Algorithm 1. Actions live in a bounded ``Box(low, high, (D,))``; the actor outputs
``mean, log_std`` (``log_std`` clamped to [-20, 2]) of a Gaussian over ``u``, squashed to
``y = tanh(u)`` in [-1, 1]^D and sent to the env as ``a = c + h * y`` (``c``, ``h``: the
bounds' centre and half-range). Log-probabilities are those of ``y`` (appendix C, eq. 26):

    log pi(y|s) = log N(u; mean, std) - sum_d log(1 - tanh(u_d)^2)

The Q-networks read ``[flat obs, y]``; the batch's ``actions`` are the env actions ``a``,
mapped back to ``y`` for the loss. For a batch of transitions ``(s, a, r, s', terminated)``
(``k = n_steps`` per row with n-step targets, else 1), one update computes

    y'  ~ pi(.|s'),
    target = r + gamma^k (1 - terminated) (min_j Q'_j(s', y') - alpha log pi(y'|s'))
    L_Q = mean_i[ w_i ((Q_1(s, y) - target)^2 + (Q_2(s, y) - target)^2) / 2 ]   (eq. 5, twin Q)
    y~  ~ pi(.|s) (reparametrised),  L_pi = mean_i[ alpha log pi(y~|s) - min_j Q_j(s, y~) ]  (eq. 7)
    L_alpha = -mean_i[ log alpha * (log pi(y~|s) + target_entropy) ]   (eq. 18, in log alpha)

and steps three optimizers, each with the gradient of its own loss w.r.t. its own
parameters (the critics, the actor, log alpha), computed before any of them steps
(``TorchPolicy.compute_losses``, as RLlib's SAC learner).

``Q'_j`` are the target critics, moved towards the online ones by ``update_target(tau)``
(Polyak averaging, ``Q' <- (1 - tau) Q' + tau Q``; the plan's ``UpdateTarget(tau=...)``).
``w_i`` = prioritized-replay weights when present, else 1; ``td_error = Q_1 - target``.
Exploration: actions from the actor's distribution; uniform in the bounds for the first
``random_timesteps`` env steps sampled.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Independent, Normal, TanhTransform, TransformedDistribution

from plangraph.algorithms.sac.config import SACConfig
from plangraph.ops.models import MLPModel
from plangraph.rl.action_layout import bounded_box
from plangraph.rl.models import flatten_obs, mlp, mlp_forward, soft_update
from plangraph.rl.policy import Stats, TorchPolicy, inference, to_tensor
from plangraph.rl.postprocessing import (
    TRANSITION_LOSS_COLUMNS,
    TRANSITION_OPTIONAL_COLUMNS,
    Fragment,
    transition_columns,
)
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch
_LOG_STD_MIN, _LOG_STD_MAX = -20.0, 2.0


class SACModel(nn.Module):
    """Actor ``[B, obs_dim] -> [mean, log_std] [B, 2 D]``, twin critics
    ``[B, obs_dim + D] -> [B]`` and the entropy temperature ``log_alpha`` (a scalar)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hiddens: tuple[int, ...],
        activation: str,
        initial_alpha: float,
    ) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, hiddens, 2 * act_dim, activation, out_gain=0.01)
        self.q1 = mlp(obs_dim + act_dim, hiddens, 1, activation, out_gain=1.0)
        self.q2 = mlp(obs_dim + act_dim, hiddens, 1, activation, out_gain=1.0)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial_alpha)))

    def pi(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, log_std)``, each float32 ``[B, D]``."""
        mean, log_std = torch.chunk(mlp_forward(self.actor, flatten_obs(obs)), 2, dim=-1)
        return mean, torch.clamp(log_std, _LOG_STD_MIN, _LOG_STD_MAX)

    def critics(self) -> list[nn.Sequential]:
        return [self.q1, self.q2]


def q_values(nets: list[nn.Sequential], obs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``Q_j(s, y)`` of each critic: float32 ``[J, B]``."""
    x = torch.cat([flatten_obs(obs), y], dim=-1)
    return torch.stack([mlp_forward(q, x).squeeze(-1) for q in nets])


def squashed_sample(
    mean: torch.Tensor, log_std: torch.Tensor, eps: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reparametrised draw ``y = tanh(mean + std * eps)`` for standard normal noise
    ``eps`` and ``log pi(y)`` (module doc), float32 ``[B, D]`` and ``[B]``: torch's
    ``TransformedDistribution`` of ``Independent(Normal(mean, std), 1)`` by a
    ``TanhTransform``, whose log-prob of ``y`` reads the pre-image ``u`` from the
    transform's cache (not ``atanh(y)``, which rounds badly near the bounds)."""
    squash = TanhTransform(cache_size=1)
    std = torch.exp(log_std)
    dist = TransformedDistribution(Independent(Normal(mean, std), 1), [squash])
    y = squash(mean + std * eps)
    return y, dist.log_prob(y)


class SACPolicy(TorchPolicy[SACConfig]):
    """SAC policy (module docstring); ``config``: :class:`~plangraph.ops.policies.SACConfig`.

    ``get_weights()`` carries the actor, the critics and ``log_alpha`` (the model);
    ``get_state()`` adds the target critics and the three optimizers
    (``optimizer_params``: ``critic``, ``actor``, ``alpha``).

    Raises:
        ValueError: an action space that is not a 1-D ``Box`` with finite bounds, or a
            model config that is no MLP.
    """

    config_type = SACConfig
    model: SACModel
    #: a 1-D ``Box`` with finite bounds (``__init__`` refuses others)
    action_space: gym.spaces.Box
    loss_columns = TRANSITION_LOSS_COLUMNS
    optional_loss_columns = TRANSITION_OPTIONAL_COLUMNS

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: SACConfig,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        if device == "cuda" or device.startswith("cuda:"):
            # Its squashing constants and sampling generator live on the CPU.
            raise ValueError(
                f'learner device "{device}": the SAC learner trains on the CPU only; use '
                'learner.device "auto" or "cpu"'
            )
        action_space = bounded_box(action_space, "SACPolicy")
        super().__init__(observation_space, action_space, config, seed)
        self.action_shape = tuple(action_space.shape)
        self._low = np.asarray(action_space.low, np.float32)
        self._high = np.asarray(action_space.high, np.float32)
        self._centre = (self._high + self._low) / 2.0
        self._half = (self._high - self._low) / 2.0
        self._centre_t = torch.from_numpy(self._centre)
        self._half_t = torch.from_numpy(self._half)
        dim = int(action_space.shape[0])
        self.target_entropy = (
            float(-dim) if config.target_entropy is None else float(config.target_entropy)
        )
        m = self.model
        self._actor_params = list(m.actor.parameters())
        self._critic_params = [p for q in m.critics() for p in q.parameters()]
        self._torch_gen = torch.Generator().manual_seed(int(seed))

    def build_model(self) -> SACModel:
        """The actor, the twin critics and ``log_alpha`` (plus the target critics).

        Raises:
            ValueError: the model config is no MLP (e.g. the default CNN for image
                observations, which the compiler refuses, PG184).
        """
        obs_shape = tuple(self.observation_space.shape)
        spec = self.config.resolved_model(obs_shape)
        if not isinstance(spec, MLPModel):
            raise ValueError(
                f"SACPolicy builds MLP models only, but its model for observations "
                f'{list(obs_shape)} is a {spec.type} (give model={{"type": "mlp", ...}})'
            )
        model = SACModel(
            self.obs_dim,
            int(self.action_space.shape[0]),
            spec.hiddens,
            spec.activation,
            self.config.initial_alpha,
        )
        self.target_critics = copy.deepcopy(model.critics())
        for q in self.target_critics:
            for p in q.parameters():
                p.requires_grad_(False)
        return model

    def optimizer_params(self) -> dict[str, list[nn.Parameter]]:
        """Three optimizers: the twin critics, the actor and the temperature."""
        return {
            "critic": self._critic_params,
            "actor": self._actor_params,
            "alpha": [self.model.log_alpha],
        }

    @property
    def alpha(self) -> float:
        return float(self.model.log_alpha.detach().exp())

    # --- acting -----------------------------------------------------------------------
    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """Replay transitions: ``next_obs``, n-step ones with ``n_step > 1``."""
        return transition_columns(fragment, self.config.n_step, self.config.gamma)

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Env actions for ``obs [B, *obs_shape]``: ``(float32 [B, D] within the bounds,
        {})``; the squashed mean when not ``explore``, uniform while
        ``global_timestep < random_timesteps``."""
        n = int(np.asarray(obs).shape[0])
        if explore and self.global_timestep < self.config.random_timesteps:
            y = self._action_rng.uniform(-1.0, 1.0, (n, *self.action_shape))
        else:
            with inference():
                mean_t, log_std_t = self.model.pi(to_tensor(np.asarray(obs)))
            mean, log_std = mean_t.numpy(), log_std_t.numpy()
            u = mean
            if explore:
                eps = self._action_rng.standard_normal(mean.shape, dtype=np.float32)
                u = mean + np.exp(log_std) * eps
            y = np.tanh(u)
        return (self._centre + self._half * y).astype(np.float32), {}

    def to_unit(self, actions: torch.Tensor) -> torch.Tensor:
        """Env actions ``[B, D]`` -> float32 ``y = (a - c) / h`` in [-1, 1] ``[B, D]``
        (what the critics read), clamped to the bounds."""
        return torch.clamp((actions.float() - self._centre_t) / self._half_t, -1.0, 1.0)

    # --- learning ---------------------------------------------------------------------
    @property
    def generator(self) -> torch.Generator:
        """The learner's torch generator (its noise draws): seeded by the policy's seed,
        saved in its state, apart from torch's global RNG."""
        return self._torch_gen

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparametrised draw ``y ~ pi(.|s)`` for ``obs [B, obs_dim]`` and its
        ``log pi(y|s)``: float32 ``[B, D]`` and ``[B]`` (``squashed_sample``)."""
        mean, log_std = self.model.pi(obs)
        # seeded like the rest of the policy, without touching torch's global RNG
        eps = torch.randn(mean.shape, generator=self._torch_gen)
        return squashed_sample(mean, log_std, eps)

    def compute_losses(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[dict[str, torch.Tensor], Stats]:
        """The critics', the actor's and the temperature's losses (module doc), each
        stepping its own optimizer."""
        cfg, m = self.config, self.model
        obs, next_obs = t[_SB.OBS], t[_SB.NEXT_OBS]
        alpha = m.log_alpha.exp().detach()
        with torch.no_grad():
            next_y, next_logp = self.sample(next_obs)
            next_q = q_values(self.target_critics, next_obs, next_y).min(dim=0).values
            if _SB.N_STEPS in t:
                discount = torch.pow(cfg.gamma, t[_SB.N_STEPS].float())
            else:
                discount = torch.tensor(cfg.gamma)
            not_done = 1.0 - t[_SB.TERMINATEDS].float()
            target = t[_SB.REWARDS].float() + discount * not_done * (next_q - alpha * next_logp)
        q = q_values(m.critics(), obs, self.to_unit(t[_SB.ACTIONS]))
        per_row = 0.5 * ((q - target) ** 2).sum(0)
        if _SB.WEIGHTS in t:
            per_row = t[_SB.WEIGHTS].float() * per_row
        critic_loss = per_row.mean()

        y, logp = self.sample(obs)
        q_pi = q_values(m.critics(), obs, y).min(dim=0).values
        actor_loss = (alpha * logp - q_pi).mean()
        alpha_loss = -(m.log_alpha * (logp.detach() + self.target_entropy)).mean()
        losses = {"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss}
        if not with_stats:
            return losses, {}
        return losses, {
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "alpha_loss": alpha_loss.item(),
            "alpha": self.alpha,
            "entropy": -logp.mean().item(),
            "mean_q": q[0].mean().item(),
            "td_error": (q[0] - target).detach().numpy().astype(np.float32),
        }

    def update_target(self, tau: float = 1.0) -> None:
        """Move the target critics towards the online ones: ``Q' <- (1 - tau) Q' + tau Q``
        (``tau = 1``: a copy)."""
        for target, online in zip(self.target_critics, self.model.critics(), strict=True):
            if tau >= 1.0:
                target.load_state_dict(online.state_dict())
            else:
                soft_update(target, online, tau)

    # --- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["torch_rng"] = self._torch_gen.get_state().numpy().copy()
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        super().set_state(state)
        self._torch_gen.set_state(torch.from_numpy(np.asarray(state["torch_rng"])))
