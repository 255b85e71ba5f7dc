"""DQN (Mnih et al. 2015) with double-Q targets (van Hasselt et al. 2016) and Huber loss.

For a batch of transitions ``(s, a, r, s', terminated)``:

    a*    = argmax_a' Q(s', a')            (online net; double_q)   or   Q_target's argmax
    y     = r + gamma * (1 - terminated) * Q_target(s', a*)
    td    = Q(s, a) - y
    L     = mean_i[ w_i * huber_delta(td_i) ]     w_i = batch["weights"] if present, else 1

With ``n_step > 1`` the batch rows are n-step transitions (see ``RolloutWorker``): ``r``
is the discounted sum of ``k <= n_step`` rewards, ``s'`` the state ``k`` steps later, and
the bootstrap is discounted by ``gamma ** k`` (column ``n_steps``).

Truncated transitions bootstrap (only ``terminated`` zeroes the target); ``next_obs`` of a
truncated step is the final observation of the episode. ``huber_delta(x)`` is ``x^2 / 2``
for ``|x| <= delta`` and ``delta (|x| - delta / 2)`` beyond. The target network is a copy
of the online net refreshed by ``update_target()``.

Exploration: epsilon-greedy, annealed linearly or per rollout worker as Ape-X's
(``plangraph.algorithms.dqn.exploration``, shared with R2D2).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from plangraph.algorithms.dqn.config import DQNConfig
from plangraph.algorithms.dqn.exploration import EpsilonGreedy
from plangraph.ops.models import MLPModel
from plangraph.rl.models import EncoderQNetwork, QNetwork, build_encoder, soft_update
from plangraph.rl.policy import Stats, TorchPolicy, inference
from plangraph.rl.postprocessing import (
    TRANSITION_LOSS_COLUMNS,
    TRANSITION_OPTIONAL_COLUMNS,
    Fragment,
    transition_columns,
)
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch


class DQNPolicy(EpsilonGreedy, TorchPolicy[DQNConfig]):
    """DQN policy: online Q-network, target Q-network, epsilon-greedy exploration."""

    config_type = DQNConfig
    model: QNetwork | EncoderQNetwork

    loss_columns = TRANSITION_LOSS_COLUMNS
    optional_loss_columns = TRANSITION_OPTIONAL_COLUMNS

    def build_model(self) -> QNetwork | EncoderQNetwork:
        obs_shape = tuple(self.observation_space.shape)
        cfg = self.config.resolved_model(obs_shape)
        model: QNetwork | EncoderQNetwork
        if isinstance(cfg, MLPModel):  # one network: vf_share_layers does not apply
            model = QNetwork(self.obs_dim, self.num_actions, cfg.hiddens, cfg.activation)
        else:
            encoder = build_encoder(cfg, self.observation_space)
            model = EncoderQNetwork(encoder, self.num_actions)
        self.target_model = copy.deepcopy(model)
        for p in self.target_model.parameters():
            p.requires_grad_(False)
        return model

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """Replay transitions: ``next_obs``, n-step ones with ``n_step > 1``."""
        return transition_columns(fragment, self.config.n_step, self.config.gamma)

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Greedy actions, replaced by uniform random ones with probability epsilon.

        Args:
            obs: ``[B, *obs_shape]`` observations.

        Returns:
            ``(actions int64 [B], {})``.
        """
        with inference():
            q = self.model(self.obs_tensor(obs)).cpu().numpy()
        return self.epsilon_greedy(q, explore), {}

    def compute_q_values(self, obs: np.ndarray) -> np.ndarray:
        """Online ``Q(obs, .)``: float32 ``[B, num_actions]``."""
        with inference():
            return self.model(self.obs_tensor(obs)).cpu().numpy()

    def update_target(self, tau: float = 1.0) -> None:
        """Copy the online network into the target network (``tau = 1``: hard update), or
        move the target towards it, ``target <- (1 - tau) target + tau online``."""
        if tau >= 1.0:
            self.target_model.load_state_dict(self.model.state_dict())
        else:
            soft_update(self.target_model, self.model, tau)

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        q = self.model(t[_SB.OBS])
        q_t = q.gather(1, t[_SB.ACTIONS].long().unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            q_next_target = self.target_model(t[_SB.NEXT_OBS])
            if cfg.double_q:
                a_star = self.model(t[_SB.NEXT_OBS]).argmax(dim=1, keepdim=True)
                q_next = q_next_target.gather(1, a_star).squeeze(1)
            else:
                q_next = q_next_target.max(dim=1).values
            not_done = 1.0 - t[_SB.TERMINATEDS].float()
            if _SB.N_STEPS in t:
                discount = torch.pow(cfg.gamma, t[_SB.N_STEPS].float())
            else:
                discount = torch.tensor(cfg.gamma)
            target = t[_SB.REWARDS].float() + discount * not_done * q_next
        td = q_t - target
        per_row = F.huber_loss(q_t, target, reduction="none", delta=cfg.huber_delta)
        if _SB.WEIGHTS in t:
            loss = (t[_SB.WEIGHTS].float() * per_row).mean()
        else:
            loss = per_row.mean()
        if not with_stats:
            return loss, {}
        return loss, {
            "loss": loss.item(),
            "mean_q": q_t.mean().item(),
            "mean_td_error": td.abs().mean().item(),
            "epsilon": self.epsilon,
            "td_error": td.detach().cpu().numpy().astype(np.float32),
        }
