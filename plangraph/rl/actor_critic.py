"""The stochastic actor-critic policy several algorithms share (A2C, PPO, IMPALA, APPO,
PG): ``pi(a|s)`` and a value head ``V(s)`` on a registered model's encoder, acting by
sampling from ``torch.distributions``, and GAE postprocessing (``gae_columns``) for the
algorithms that learn from advantages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import Distribution

from plangraph.ops.models import MLPModel
from plangraph.ops.policies import ActorCriticConfig
from plangraph.rl.action_layout import action_layout
from plangraph.rl.distributions import action_distribution, action_sampler
from plangraph.rl.models import (
    ActorCritic,
    EncoderActorCritic,
    RecurrentActorCritic,
    build_encoder,
)
from plangraph.rl.policy import TorchPolicy, inference
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sequences import PREV_ACTIONS, PREV_REWARDS, SEQ_BEGIN, STATE_PREFIX, pad_index

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
    _recurrent: bool = False

    def build_model(self) -> ActorCritic | EncoderActorCritic:
        # Not validated per minibatch: the actions are the sampler's or a checked
        # dataset's, and a NaN, in the logits or anywhere else in the loss, is stopped at
        # the gradient before the step (TorchPolicy._apply).
        self._dist = action_distribution(self.action_space, validate_args=False)
        self._sample = action_sampler(self.action_space)
        self.action_shape, self.action_dtype, self.num_dist_inputs = action_layout(
            self.action_space
        )
        box = isinstance(self.action_space, gym.spaces.Box)
        gaussian_dim = self.action_shape[0] if box else 0
        cfg = self.config
        obs_shape = tuple(self.observation_space.shape)
        model = cfg.resolved_model(obs_shape)
        if model.recurrent:
            self._recurrent = True
            self.max_seq_len = model.sequence_length()
            obs_space, act_space = self.observation_space, self.action_space
            return RecurrentActorCritic(
                lambda: build_encoder(model, obs_space, act_space),
                self.num_dist_inputs,
                bool(getattr(model, "vf_share_layers", True)),
                gaussian_dim=gaussian_dim,
                free_log_std=cfg.free_log_std,
                log_std_init=cfg.log_std_init,
            )
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
        ``[B, num_dist_inputs]``) are ``inputs``, built with ``validate_args=False``: its
        parameters and the actions given to ``log_prob`` are not checked (a loss of
        non-finite parameters fails at the gradient: ``NonFiniteGradientError``)."""
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
        if self._recurrent:  # one step from a fresh episode's state
            actions, extras, _ = self.compute_actions_recurrent(
                obs, self.initial_inputs(len(obs)), explore
            )
            return actions, extras
        with inference():
            inputs = self.model.pi(self.obs_tensor(obs))
            actions, logp = self._sample(inputs, self._action_rng if explore else None)
            return actions, {_SB.ACTION_LOGP: logp, _SB.ACTION_DIST_INPUTS: inputs.cpu().numpy()}

    def compute_values(self, obs: np.ndarray) -> np.ndarray:
        """``V(obs)``: float32 ``[B]`` for observations ``[B, *obs_shape]``.

        Raises:
            TypeError: a recurrent policy (its value needs the state:
                ``compute_values_recurrent``).
        """
        if self._recurrent:
            raise TypeError(
                f"{type(self).__name__} is recurrent: its values need the state "
                "(compute_values_recurrent)"
            )
        with inference():
            return self.model.vf(self.obs_tensor(obs)).cpu().numpy()

    # --- recurrent models (docs/recurrent.md) -------------------------------------------
    @property
    def is_recurrent(self) -> bool:
        """Whether the model is recurrent (a model type whose settings say so)."""
        return self._recurrent

    def initial_state(self, n: int) -> dict[str, np.ndarray]:
        """``{"state_in_<name>": float32 [n, ...]}`` of the model's initial state; ``{}``
        for a model without state."""
        if not self._recurrent:
            return {}
        assert isinstance(self.model, RecurrentActorCritic)
        with inference():
            state = self.model.initial_state(n)
            return {STATE_PREFIX + k: v.cpu().numpy().astype(np.float32) for k, v in state.items()}

    def initial_inputs(self, n: int) -> dict[str, np.ndarray]:
        """What a recurrent model reads besides the observation at ``n`` episodes' first
        steps: ``initial_state(n)``, ``prev_actions`` (zeros ``[n, *action_shape]``, the
        action dtype) and ``prev_rewards`` (float32 zeros ``[n]``)."""
        out = self.initial_state(n)
        out[PREV_ACTIONS] = np.zeros((n, *self.action_shape), dtype=self.action_dtype)
        out[PREV_REWARDS] = np.zeros(n, dtype=np.float32)
        return out

    def _step(
        self, obs: np.ndarray, inputs: Mapping[str, np.ndarray]
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        assert isinstance(self.model, RecurrentActorCritic)
        state = {
            k[len(STATE_PREFIX) :]: self.obs_tensor(np.asarray(v, dtype=np.float32))
            for k, v in inputs.items()
            if k.startswith(STATE_PREFIX)
        }
        dist_inputs, values, out = self.model.forward_seq(
            self.obs_tensor(obs)[:, None],
            state,
            self.obs_tensor(inputs[PREV_ACTIONS])[:, None],
            self.obs_tensor(inputs[PREV_REWARDS])[:, None],
        )
        return dist_inputs[:, 0], values[:, 0], out

    def compute_actions_recurrent(
        self, obs: np.ndarray, inputs: Mapping[str, np.ndarray], explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """One step of the recurrent model (``TorchPolicy.compute_actions_recurrent``).

        Returns:
            ``(actions [B, *action_shape], {"action_logp": float32 [B],
            "action_dist_inputs": float32 [B, num_dist_inputs], "vf_preds": float32 [B]},
            {"state_in_<name>": float32 [B, ...]})``: the value of this step rides along
            (GAE reads it: the value of a recurrent model depends on the state).
        """
        with inference():
            dist_inputs, values, out = self._step(obs, inputs)
            actions, logp = self._sample(dist_inputs, self._action_rng if explore else None)
            extras = {
                _SB.ACTION_LOGP: logp,
                _SB.ACTION_DIST_INPUTS: dist_inputs.cpu().numpy(),
                _SB.VF_PREDS: values.cpu().numpy(),
            }
            return actions, extras, {STATE_PREFIX + k: v.cpu().numpy() for k, v in out.items()}

    def compute_values_recurrent(
        self, obs: np.ndarray, inputs: Mapping[str, np.ndarray]
    ) -> np.ndarray:
        """``V(obs)`` of one step of the recurrent model from ``inputs`` (as
        ``compute_actions_recurrent``): float32 ``[B]``."""
        with inference():
            return self._step(obs, inputs)[1].cpu().numpy()

    def pi_vf(self, t: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Distribution inputs float32 ``[B, num_dist_inputs]`` and values float32 ``[B]``
        of a (mini)batch's rows (``t``: its tensors, ``obs`` and, recurrent, the
        ``plangraph.rl.sequences`` columns with ``seq_begin``).

        A recurrent model runs once over the minibatch's sequences padded to ``[S, L]``,
        each from the state stored at its first row; the padded steps are dropped, so
        the rows come back in their order and every loss mean is over real rows only.
        """
        if not self._recurrent:
            return self.model.pi_vf(t[_SB.OBS])
        assert isinstance(self.model, RecurrentActorCritic)
        starts, index, mask = pad_index(t[SEQ_BEGIN])
        state = {
            k[len(STATE_PREFIX) :]: v[starts].float()
            for k, v in t.items()
            if k.startswith(STATE_PREFIX)
        }
        dist_inputs, values, _ = self.model.forward_seq(
            t[_SB.OBS][index], state, t[PREV_ACTIONS][index], t[PREV_REWARDS][index]
        )
        return dist_inputs[mask], values[mask]

    @staticmethod
    def _normalize(adv: torch.Tensor) -> torch.Tensor:
        if adv.numel() < 2:
            return adv
        return (adv - adv.mean()) / (adv.std() + 1e-8)
