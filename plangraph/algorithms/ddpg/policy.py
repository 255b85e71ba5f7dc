"""DDPG's learner, and the deterministic actor-critic learner TD3's extends.

Lillicrap et al. 2016, "Continuous control with deep reinforcement learning"
(arXiv:1509.02971), Algorithm 1. Written on the public learner API only (``plangraph.rl``,
``plangraph.ops.models``), as a user's algorithm would be.

Actions live in a bounded ``Box(low, high, (D,))``. The actor outputs
``y = mu(s) = tanh(f(s))`` in [-1, 1]^D, sent to the env as ``a = c + h * y`` (``c``, ``h``:
the bounds' centre and half-range, float32 ``[D]``). The critics read ``[flat obs, y]``;
the batch's ``actions`` are the env actions ``a``, mapped back to ``y`` for the loss. For a
batch of transitions ``(s, a, r, s', terminated)`` (``k = n_steps`` per row with n-step
targets, else 1), one update computes

    y'     = mu'(s')                                   (TD3: smoothed, see below)
    target = r + gamma^k (1 - terminated) min_j Q'_j(s', y')        (DDPG: one critic)
    L_Q    = mean_i[ w_i sum_j (Q_j(s, y) - target)^2 ]     (Algorithm 1, "update critic")
    L_mu   = -mean_i[ Q_1(s, mu(s)) ]      (the deterministic policy gradient, eq. 6, as a
                                            loss whose gradient w.r.t. the actor it is)

and steps two optimizers, ``critic`` with the gradient of ``L_Q`` w.r.t. the critics and
``actor`` with that of ``L_mu`` w.r.t. the actor, both computed before either steps
(``TorchPolicy.compute_losses``; the papers' code steps the critic first and then takes
the actor's gradient through the stepped critic: one update's difference). ``w_i`` =
prioritized-replay weights when present, else 1; ``td_error = Q_1 - target``.

``mu'`` and ``Q'_j`` are the target networks, moved towards the online ones by
``update_target(tau)`` (Polyak averaging, ``theta' <- (1 - tau) theta' + tau theta``; the
plan's ``UpdateTarget(tau=...)``). Exploration: ``y = clip(mu(s) + sigma * eps, -1, 1)``,
``eps ~ N(0, I)``, ``sigma = exploration_noise`` (per worker with Ape-X's
``per_worker_noise_alpha``); uniform in the bounds for the first ``random_timesteps`` env
steps sampled. The batch keeps the clipped action, the one the env executed.

TD3 (``plangraph.algorithms.td3.policy``) sets, through the hooks of
:class:`DeterministicActorCriticPolicy`, two critics (``num_critics``), an actor loss on
every ``policy_delay``-th update only, and target policy smoothing
``y' = clip(mu'(s') + clip(sigma~ * eps, -c, c), -1, 1)`` (``target_action``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from plangraph.algorithms.ddpg.config import DDPGConfig, DeterministicActorCriticConfig
from plangraph.ops.models import MLPModel
from plangraph.rl import (
    TRANSITION_LOSS_COLUMNS,
    TRANSITION_OPTIONAL_COLUMNS,
    Fragment,
    SampleBatch,
    Stats,
    TorchPolicy,
    bounded_box,
    inference,
    mlp,
    soft_update,
    transition_columns,
)

__all__ = ["DDPGPolicy", "DeterministicActorCriticModel", "DeterministicActorCriticPolicy"]

_SB = SampleBatch

ConfigT = TypeVar("ConfigT", bound=DeterministicActorCriticConfig, covariant=True)
"""The settings model of a deterministic actor-critic learner (DDPG's, TD3's)."""


class DeterministicActorCriticModel(nn.Module):
    """The actor ``[B, obs_dim] -> y [B, D]`` in [-1, 1] (tanh) and ``num_critics``
    Q-networks ``[B, obs_dim + D] -> [B]``; observations of any shape and dtype are
    flattened to float32 ``[B, obs_dim]``.

    Initialisation: orthogonal (``plangraph.rl.mlp``), the actor's output layer with gain
    0.01 so that first actions sit near the centre of the bounds (the papers: uniform
    +-3e-3), the critics' with gain 1.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hiddens: tuple[int, ...],
        activation: str,
        num_critics: int,
    ) -> None:
        super().__init__()
        self.actor = mlp(obs_dim, hiddens, act_dim, activation, out_gain=0.01)
        self.critics = nn.ModuleList(
            mlp(obs_dim + act_dim, hiddens, 1, activation, out_gain=1.0) for _ in range(num_critics)
        )

    @staticmethod
    def flat(obs: torch.Tensor) -> torch.Tensor:
        """``[B, *obs_shape]`` of any dtype -> float32 ``[B, obs_dim]``."""
        return obs.reshape(obs.shape[0], -1).to(torch.float32)

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """``mu(s)``: float32 ``[B, D]`` in [-1, 1]."""
        return torch.tanh(self.actor(self.flat(obs)))

    def q_values(self, obs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``Q_j(s, y)`` of every critic: float32 ``[J, B]``."""
        x = torch.cat([self.flat(obs), y], dim=-1)
        return torch.stack([q(x).squeeze(-1) for q in self.critics])


class DeterministicActorCriticPolicy(TorchPolicy[ConfigT]):
    """The learner of DDPG and TD3 (module docstring), generic in their settings model.

    ``get_weights()`` carries the actor and the critics (the model); ``get_state()`` adds
    the target networks, the two optimizers (``optimizer_params``: ``critic``, ``actor``),
    the count of updates (which ones step the actor) and the state of the generator of
    TD3's target noise: a restored policy makes bit-identical updates.

    Hooks a variant sets: ``num_critics`` (class attribute), ``policy_delay`` and
    ``target_action``.

    Raises:
        ValueError: an action space that is not a 1-D ``Box`` with finite bounds, or a
            model config that is no MLP.
    """

    #: Q-networks (TD3: 2, the min of their targets)
    num_critics: int = 1
    model: DeterministicActorCriticModel
    #: a 1-D ``Box`` with finite bounds (``__init__`` refuses others)
    action_space: gym.spaces.Box
    loss_columns = TRANSITION_LOSS_COLUMNS
    optional_loss_columns = TRANSITION_OPTIONAL_COLUMNS
    #: ``(worker, num_workers)``: this copy's rollout worker (0-based), for Ape-X's noise
    exploration_worker: tuple[int, int] = (0, 1)

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: ConfigT,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        action_space = bounded_box(action_space, type(self).__name__)
        super().__init__(observation_space, action_space, config, seed, device)
        self.action_shape = tuple(action_space.shape)
        low = np.asarray(action_space.low, np.float32)
        high = np.asarray(action_space.high, np.float32)
        self._centre = (high + low) / 2.0
        self._half = (high - low) / 2.0
        self._centre_t = self.to_device(torch.from_numpy(self._centre))
        self._half_t = self.to_device(torch.from_numpy(self._half))
        self._actor_params = list(self.model.actor.parameters())
        self._critic_params = list(self.model.critics.parameters())
        self._noise_std = float(self.config.exploration_noise)
        #: updates made (``compute_losses`` calls): which of them step the actor
        self.num_updates = 0
        self._last_actor_loss: float | None = None
        #: the learner's own noise (TD3's target smoothing): seeded from the run seed apart
        #: from the initialisation's and the action sampler's streams, without touching
        #: torch's global RNG; on the learner's device
        seq = np.random.SeedSequence(int(seed), spawn_key=(2,))
        self.noise_generator = torch.Generator(device=self.device)
        self.noise_generator.manual_seed(int(seq.generate_state(1)[0]))

    def build_model(self) -> DeterministicActorCriticModel:
        """The actor and the critics; the target networks (``target_model``, a copy
        without gradients) beside them.

        Raises:
            ValueError: the model config is no MLP (e.g. the default CNN for image
                observations, which the compiler refuses, PG184).
        """
        obs_shape = tuple(self.observation_space.shape)
        spec = self.config.resolved_model(obs_shape)
        if not isinstance(spec, MLPModel):
            raise ValueError(
                f"{type(self).__name__} builds MLP models only, but its model for "
                f"observations {list(obs_shape)} is a {spec.type} (give "
                'model={"type": "mlp", ...})'
            )
        model = DeterministicActorCriticModel(
            self.obs_dim,
            int(self.action_space.shape[0]),
            spec.hiddens,
            spec.activation,
            self.num_critics,
        )
        # An nn.Module attribute, so that TorchPolicy moves it to the learner's device too.
        self.target_model = copy.deepcopy(model)
        self.target_model.requires_grad_(False)
        return model

    def optimizer_params(self) -> dict[str, list[nn.Parameter]]:
        """Two optimizers: the critics and the actor."""
        return {"critic": self._critic_params, "actor": self._actor_params}

    def learning_rate(self, name: str) -> float:
        """``critic_lr`` / ``actor_lr``, or ``lr`` (``lr_schedule``) where not set."""
        fixed = {"critic": self.config.critic_lr, "actor": self.config.actor_lr}.get(name)
        return self.cur_lr if fixed is None else float(fixed)

    # --- hooks of the variants (TD3) ---------------------------------------------------
    @property
    def policy_delay(self) -> int:
        """Updates per actor update (DDPG: 1, the actor steps on every update)."""
        return 1

    def target_action(self, next_obs: torch.Tensor) -> torch.Tensor:
        """The action the targets bootstrap with, ``y' = mu'(s')``: float32 ``[B, D]`` in
        [-1, 1] (TD3 smooths it)."""
        return self.target_model.act(next_obs)

    # --- acting -----------------------------------------------------------------------
    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """Replay transitions: ``next_obs``, n-step ones with ``n_step > 1``."""
        return transition_columns(fragment, self.config.n_step, self.config.gamma)

    def set_exploration_worker(self, worker: int, num_workers: int) -> None:
        """Called by the ``RolloutWorker`` holding this copy (worker ``worker`` of
        ``num_workers``, 0-based): with ``per_worker_noise_alpha`` set, its exploration
        noise is that worker's Ape-X std (``config.worker_noise``).

        Raises:
            ValueError: ``worker`` outside ``[0, num_workers)``.
        """
        self._noise_std = self.config.worker_noise(int(worker), int(num_workers))
        self.exploration_worker = (int(worker), int(num_workers))

    @property
    def noise_std(self) -> float:
        """The std of this copy's exploration noise, in action half-ranges."""
        return self._noise_std

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Env actions for ``obs [B, *obs_shape]``: ``(float32 [B, D] within the bounds,
        {})``; ``mu(s)`` when not ``explore``, with clipped Gaussian noise when exploring,
        uniform while ``global_timestep < random_timesteps``."""
        n = int(np.asarray(obs).shape[0])
        if explore and self.global_timestep < self.config.random_timesteps:
            y = self._action_rng.uniform(-1.0, 1.0, (n, *self.action_shape))
        else:
            with inference():
                y = self.model.act(self.obs_tensor(np.asarray(obs))).cpu().numpy()
            if explore and self._noise_std > 0.0:
                eps = self._action_rng.standard_normal(y.shape, dtype=np.float32)
                y = np.clip(y + self._noise_std * eps, -1.0, 1.0)
        return (self._centre + self._half * y).astype(np.float32), {}

    def _to_unit(self, actions: torch.Tensor) -> torch.Tensor:
        """Env actions -> ``y`` in [-1, 1] (what the critics read)."""
        return torch.clamp((actions.float() - self._centre_t) / self._half_t, -1.0, 1.0)

    # --- learning ---------------------------------------------------------------------
    def compute_losses(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[dict[str, torch.Tensor], Stats]:
        """The critics' loss every update and the actor's on every ``policy_delay``-th
        (module doc); each steps its own optimizer. Counts the update (``num_updates``).

        Stats: ``critic_loss``, ``actor_loss`` (of the latest update that had one),
        ``mean_q`` (``Q_1`` on the batch), ``td_error`` (float32 ``[B]``, for prioritized
        replay)."""
        cfg, m = self.config, self.model
        obs, next_obs = t[_SB.OBS], t[_SB.NEXT_OBS]
        self.num_updates += 1
        with torch.no_grad():
            next_y = self.target_action(next_obs)
            next_q = self.target_model.q_values(next_obs, next_y).min(dim=0).values
            if _SB.N_STEPS in t:
                discount = torch.pow(cfg.gamma, t[_SB.N_STEPS].float())
            else:
                discount = torch.tensor(cfg.gamma, device=next_q.device)
            not_done = 1.0 - t[_SB.TERMINATEDS].float()
            target = t[_SB.REWARDS].float() + discount * not_done * next_q
        q = m.q_values(obs, self._to_unit(t[_SB.ACTIONS]))
        per_row = ((q - target) ** 2).sum(0)
        if _SB.WEIGHTS in t:
            per_row = t[_SB.WEIGHTS].float() * per_row
        critic_loss = per_row.mean()
        losses = {"critic": critic_loss}
        if self.num_updates % self.policy_delay == 0:
            # Q_1 only (TD3, sec. 5.2; DDPG has one): the actor follows one critic.
            actor_loss = -m.q_values(obs, m.act(obs))[0].mean()
            losses["actor"] = actor_loss
            self._last_actor_loss = float(actor_loss.detach())
        if not with_stats:
            return losses, {}
        stats: Stats = {
            "critic_loss": critic_loss.item(),
            "mean_q": q[0].mean().item(),
            "td_error": (q[0] - target).detach().cpu().numpy().astype(np.float32),
        }
        if self._last_actor_loss is not None:
            stats["actor_loss"] = self._last_actor_loss
        return losses, stats

    def update_target(self, tau: float = 1.0) -> None:
        """Move the target actor and critics towards the online ones:
        ``theta' <- (1 - tau) theta' + tau theta`` (``tau = 1``: a copy)."""
        if tau >= 1.0:
            self.target_model.load_state_dict(self.model.state_dict())
        else:
            soft_update(self.target_model, self.model, tau)

    # --- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """``TorchPolicy.get_state()`` plus ``target_weights`` (name -> numpy copy),
        ``num_updates``, ``last_actor_loss`` and ``torch_rng`` (the target-noise
        generator's state, uint8 numpy)."""
        state = super().get_state()
        state["target_weights"] = {
            k: v.detach().cpu().numpy().copy() for k, v in self.target_model.state_dict().items()
        }
        state["num_updates"] = self.num_updates
        state["last_actor_loss"] = self._last_actor_loss
        state["torch_rng"] = self.noise_generator.get_state().numpy().copy()
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()``.

        Raises:
            KeyError: a state without target networks (not this algorithm's).
            RuntimeError: target weights that do not match the model.
        """
        super().set_state(state)
        self.target_model.load_state_dict(
            {k: torch.tensor(np.asarray(v)) for k, v in state["target_weights"].items()}
        )
        self.num_updates = int(state["num_updates"])
        self._last_actor_loss = state["last_actor_loss"]
        self.noise_generator.set_state(torch.from_numpy(np.asarray(state["torch_rng"])))


class DDPGPolicy(DeterministicActorCriticPolicy[DDPGConfig]):
    """DDPG (Lillicrap et al. 2016): one critic, the actor on every update, the target
    actor's action unsmoothed (module doc); ``config``:
    :class:`~plangraph.algorithms.ddpg.DDPGConfig`."""

    config_type = DDPGConfig
