"""R2D2's learner (Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed
Reinforcement Learning", ICLR 2019).

A Q-network on a registered model's encoder (``lstm``: recurrent; an ``mlp`` works the
same way, each step reading its observation only). Training batches are replayed
sequences (``plangraph.rl.replay_buffer.SequenceReplayBuffer``): rows back to back, a
sequence's first row marked by ``seq_len`` (int32, its length), every row holding the
state its worker had before it (``state_in_*``) and the previous action and reward.
For each of the ``S`` sequences of a batch, of ``len_i`` rows:

* **stored state and burn-in** (sec. 3): the online and the target network start from
  the state stored at the sequence's first row and unroll its first ``b_i`` rows without
  gradient (``torch.no_grad``); ``b_i = burn_in``, or 0 where the sequence starts an
  episode (``t == 0``: its stored state is the initial one). The remaining
  ``n_i = len_i - b_i`` rows are trained on, plus one more step that reads ``next_obs``
  of the sequence's last row (the bootstrap state: the next observation, or an episode's
  final one where it was truncated).
* **n-step double-Q targets with value rescaling** (sec. 2): for a trained row ``k``,
  ``m = min(n_step, n_i - k)``, ``R = sum_{j<m} gamma^j r_{k+j}``,
  ``a* = argmax_a Q(x_{k+m}, a)`` (online net; ``double_q``),
  ``y_k = h(R + gamma^m (1 - terminal) h^-1(Q_target(x_{k+m}, a*)))`` with
  ``h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x`` (``value_rescale``) and its inverse
  (``inverse_value_rescale``); ``terminal`` only where ``k + m`` is the step after the
  sequence's last row and that row terminated its episode (truncation bootstraps).
* **loss**: ``L = mean_i[w_i * mean_k 0.5 (Q(x_k, a_k) - y_k)^2]`` over the sequences with
  a trained row, ``w_i`` the importance weight (prioritized replay), 1 otherwise.
* **priorities**: ``p_i = eta max_k |delta_k| + (1 - eta) mean_k |delta_k|`` over the
  trained rows (``eta = priority_eta``, 0.9), reported as ``td_error`` (float32 ``[B]``,
  ``p_i`` on every row of sequence ``i``), which the replay buffer turns into
  ``|p_i| + eps``.

Acting: epsilon-greedy on the online Q-values, one step at a time from each sub-env's
carried state (``compute_actions_recurrent``); epsilon anneals linearly, or per worker as
Ape-X's (``per_worker_epsilon_alpha``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from plangraph.algorithms.dqn.exploration import EpsilonGreedy
from plangraph.algorithms.r2d2.config import R2D2Config
from plangraph.algorithms.r2d2.sequences import replay_sequences
from plangraph.rl.action_layout import action_layout
from plangraph.rl.models import build_encoder, soft_update
from plangraph.rl.policy import Stats, TorchPolicy, inference, to_tensor
from plangraph.rl.postprocessing import Fragment
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sequences import (
    PREV_ACTIONS,
    PREV_REWARDS,
    STATE_PREFIX,
    pad_index,
    sequence_minibatch_indices,
)

__all__ = ["R2D2Policy", "SequenceQNetwork", "inverse_value_rescale", "value_rescale"]

_SB = SampleBatch


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`` (Pohlen et al. 2018; Kapturowski et
    al. 2019, sec. 2), elementwise; any shape, float."""
    return torch.sign(x) * (torch.sqrt(x.abs() + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """``h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)``,
    the inverse of ``value_rescale`` (Pohlen et al. 2018, Proposition A.2), elementwise."""
    root = (torch.sqrt(1.0 + 4.0 * eps * (x.abs() + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return torch.sign(x) * (root * root - 1.0)


class SequenceQNetwork(nn.Module):
    """Q-values on an encoder (``build_encoder``) over sequences.

    ``forward_seq(obs [B, T, *obs_shape], state, prev_actions [B, T, ...], prev_rewards
    [B, T])`` -> ``(q float32 [B, T, num_actions], state after step T - 1)``. A recurrent
    encoder (``RecurrentEncoder``) carries ``state``; any other reads each step's
    observation alone (``state`` is ``{}``).
    """

    def __init__(self, encoder: nn.Module, num_actions: int, recurrent: bool) -> None:
        super().__init__()
        self.encoder = encoder
        self.recurrent = recurrent
        out_dim: int = encoder.out_dim  # type: ignore[assignment]  # build_encoder checked it
        self.q_head = nn.Linear(out_dim, num_actions)
        nn.init.orthogonal_(self.q_head.weight, gain=1.0)
        nn.init.zeros_(self.q_head.bias)

    def initial_state(self, batch_size: int) -> dict[str, torch.Tensor]:
        """The encoder's state of ``batch_size`` fresh episodes (``{}`` without state)."""
        if not self.recurrent:
            return {}
        return dict(self.encoder.initial_state(batch_size))  # type: ignore[operator]

    def forward_seq(
        self,
        obs: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        prev_actions: torch.Tensor | None,
        prev_rewards: torch.Tensor | None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.recurrent:
            features, out = self.encoder(obs, state, prev_actions, prev_rewards)
            return F.linear(features, self.q_head.weight, self.q_head.bias), dict(out)
        b, t = obs.shape[0], obs.shape[1]
        features = self.encoder(obs.reshape(b * t, *obs.shape[2:])).reshape(b, t, -1)
        return F.linear(features, self.q_head.weight, self.q_head.bias), {}


class R2D2Policy(EpsilonGreedy, TorchPolicy[R2D2Config]):
    """R2D2: recurrent Q-learning from replayed sequences; see the module docstring."""

    config_type = R2D2Config
    model: SequenceQNetwork
    loss_columns = (
        _SB.OBS,
        _SB.ACTIONS,
        _SB.REWARDS,
        _SB.TERMINATEDS,
        _SB.NEXT_OBS,
        _SB.T,
        _SB.SEQ_LEN,
    )
    optional_loss_columns = (_SB.WEIGHTS,)
    _recurrent: bool = False

    def build_model(self) -> SequenceQNetwork:
        cfg = self.config
        model_cfg = cfg.resolved_model(tuple(self.observation_space.shape))
        self._recurrent = bool(model_cfg.recurrent)
        self.action_shape, self.action_dtype, _ = action_layout(self.action_space)
        self.max_seq_len = cfg.replay_sequence_length
        encoder = build_encoder(model_cfg, self.observation_space, self.action_space)
        model = SequenceQNetwork(encoder, self.num_actions, self._recurrent)
        self.target_model = copy.deepcopy(model)
        for p in self.target_model.parameters():
            p.requires_grad_(False)
        return model

    # --- state ------------------------------------------------------------------------
    @property
    def is_recurrent(self) -> bool:
        """Whether the model carries a state (the ``lstm``; not an ``mlp``)."""
        return self._recurrent

    def initial_state(self, n: int) -> dict[str, np.ndarray]:
        """``{"state_in_<name>": float32 [n, ...]}``; ``{}`` without state."""
        with inference():
            state = self.model.initial_state(n)
            return {STATE_PREFIX + k: v.cpu().numpy().astype(np.float32) for k, v in state.items()}

    def initial_inputs(self, n: int) -> dict[str, np.ndarray]:
        """``initial_state(n)`` plus zero ``prev_actions`` and ``prev_rewards``."""
        out = self.initial_state(n)
        out[PREV_ACTIONS] = np.zeros((n, *self.action_shape), dtype=self.action_dtype)
        out[PREV_REWARDS] = np.zeros(n, dtype=np.float32)
        return out

    # --- acting -----------------------------------------------------------------------
    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Epsilon-greedy actions int64 ``[B]`` for ``obs [B, *obs_shape]``; a recurrent
        model acts as at an episode's first step. Extras: ``{}``."""
        if self._recurrent:
            actions, extras, _ = self.compute_actions_recurrent(
                obs, self.initial_inputs(len(obs)), explore
            )
            return actions, extras
        with inference():
            q, _ = self.model.forward_seq(self.obs_tensor(obs)[:, None], {}, None, None)
            return self.epsilon_greedy(q[:, 0].cpu().numpy(), explore), {}

    def compute_actions_recurrent(
        self, obs: np.ndarray, inputs: Mapping[str, np.ndarray], explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """One epsilon-greedy step from ``inputs`` (``TorchPolicy.compute_actions_recurrent``):
        ``(actions int64 [B], {}, {"state_in_<name>": float32 [B, ...]})``."""
        with inference():
            state = {
                k[len(STATE_PREFIX) :]: self.obs_tensor(np.asarray(v, dtype=np.float32))
                for k, v in inputs.items()
                if k.startswith(STATE_PREFIX)
            }
            q, out = self.model.forward_seq(
                self.obs_tensor(obs)[:, None],
                state,
                self.obs_tensor(inputs[PREV_ACTIONS])[:, None],
                self.obs_tensor(inputs[PREV_REWARDS])[:, None],
            )
            actions = self.epsilon_greedy(q[:, 0].cpu().numpy(), explore)
            return actions, {}, {STATE_PREFIX + k: v.cpu().numpy() for k, v in out.items()}

    # --- postprocessing ---------------------------------------------------------------
    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """``next_obs`` ``[N, T, *obs_shape]`` and the replay sequences, ``seq_len`` int32
        ``[N, T]`` (``plangraph.algorithms.r2d2.sequences.replay_sequences``)."""
        cfg = self.config
        seq_len = replay_sequences(
            fragment.continues,
            fragment.columns[_SB.T],
            cfg.replay_sequence_length,
            cfg.replay_sequence_overlap,
            cfg.burn_in,
        )
        return {_SB.NEXT_OBS: fragment.next_obs, _SB.SEQ_LEN: seq_len}

    # --- learning ---------------------------------------------------------------------
    def update_target(self, tau: float = 1.0) -> None:
        """Copy the online network into the target network (``tau = 1``), or move the
        target towards it, ``target <- (1 - tau) target + tau online``."""
        if tau >= 1.0:
            self.target_model.load_state_dict(self.model.state_dict())
        else:
            soft_update(self.target_model, self.model, tau)

    def tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        """The ``loss_columns`` (``weights`` where present) and, recurrent, the
        ``state_in_*``, ``prev_actions`` and ``prev_rewards`` columns, as tensors.

        Raises:
            KeyError: a required column is missing (a batch not replayed as sequences).
        """
        missing = [
            c for c in self.loss_columns if c not in batch and c not in self.optional_loss_columns
        ]
        if missing:
            raise KeyError(
                f"R2D2Policy needs batch columns {missing}, batch has {sorted(batch.keys())}; "
                "train it on sequences replayed from a buffer of item 'sequence'"
            )
        names = [c for c in (*self.loss_columns, *self.optional_loss_columns) if c in batch]
        if self._recurrent:
            names += [
                c
                for c in batch.keys()
                if c.startswith(STATE_PREFIX) or c in (PREV_ACTIONS, PREV_REWARDS)
            ]
        return {c: self.to_device(to_tensor(batch[c])) for c in names}

    def _minibatch_indices(self, batch: SampleBatch, size: int) -> Iterator[np.ndarray]:
        """Minibatches of whole replayed sequences (``seq_len`` marks their first rows)."""
        lens = np.asarray(batch[_SB.SEQ_LEN])
        starts = np.flatnonzero(lens > 0)
        return sequence_minibatch_indices(starts, lens[starts], size, self._sgd_rng)

    def _unroll(
        self,
        net: SequenceQNetwork,
        t: Mapping[str, torch.Tensor],
        state: Mapping[str, torch.Tensor],
        rows: torch.Tensor,
        extra: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``net`` over the rows ``rows`` (int64 ``[S, L]``) from ``state``; where ``extra``
        (bool ``[S, L]``) the step reads ``next_obs`` of its row and that row's action and
        reward as the previous ones (the step after a sequence's last row)."""
        obs = t[_SB.OBS][rows]
        if extra is not None:
            shape = (*extra.shape, *([1] * (obs.dim() - 2)))
            obs = torch.where(extra.reshape(shape), t[_SB.NEXT_OBS][rows], obs)
        prev_a = prev_r = None
        if self._recurrent:
            prev_a, prev_r = t[PREV_ACTIONS][rows], t[PREV_REWARDS][rows]
            if extra is not None:
                shape = (*extra.shape, *([1] * (prev_a.dim() - 2)))
                prev_a = torch.where(extra.reshape(shape), t[_SB.ACTIONS][rows], prev_a)
                prev_r = torch.where(extra, t[_SB.REWARDS][rows].float(), prev_r)
        return net.forward_seq(obs, state, prev_a, prev_r)

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        starts, index, mask = pad_index(t[_SB.SEQ_LEN] > 0)  # [S], [S, L], [S, L]
        lens = mask.sum(dim=1)  # int64 [S]
        burn = torch.where(
            t[_SB.T][starts] > 0, torch.clamp(lens, max=cfg.burn_in), torch.zeros_like(lens)
        )
        n = lens - burn  # trained rows of each sequence
        stored = {
            k[len(STATE_PREFIX) :]: v[starts].float()
            for k, v in t.items()
            if k.startswith(STATE_PREFIX)
        }
        # Burn-in: both networks unroll the first b_i rows from the stored state, no grad.
        online_state, target_state = dict(stored), dict(stored)
        width = min(cfg.burn_in, int(index.shape[1]))
        if width > 0 and bool((burn > 0).any()) and self._recurrent:
            with torch.no_grad():
                _, after = self._unroll(self.model, t, stored, index[:, :width])
                _, t_after = self._unroll(self.target_model, t, stored, index[:, :width])
            keep = burn > 0
            for k, v in stored.items():
                shape = (-1, *([1] * (v.dim() - 1)))
                online_state[k] = torch.where(keep.reshape(shape), after[k], v)
                target_state[k] = torch.where(keep.reshape(shape), t_after[k], v)
        # Trained rows, then the bootstrap step after each sequence's last row.
        horizon = int(n.max()) if n.numel() else 0
        steps = torch.arange(horizon + 1, device=starts.device)
        valid = steps[None, :] < n[:, None]  # [S, H + 1]: trained rows
        extra = steps[None, :] == n[:, None]  # the bootstrap step
        last = starts + lens - 1
        rows = torch.where(valid, starts[:, None] + burn[:, None] + steps[None, :], last[:, None])
        q, _ = self._unroll(self.model, t, online_state, rows, extra)  # [S, H + 1, A]
        with torch.no_grad():
            q_target, _ = self._unroll(self.target_model, t, target_state, rows, extra)
            q_next = q.detach()
            # n-step returns inside each sequence: rewards beyond its trained rows are 0.
            rewards = torch.where(valid, t[_SB.REWARDS][rows].float(), 0.0)[:, :horizon]
            padded = F.pad(rewards, (0, cfg.n_step))
            ret = torch.zeros_like(rewards)
            for j in range(cfg.n_step):
                ret = ret + (cfg.gamma**j) * padded[:, j : j + horizon]
            ks = steps[:horizon]
            boot = torch.minimum(ks[None, :] + cfg.n_step, n[:, None])  # [S, H]
            m = (boot - ks[None, :]).clamp(min=0)
            a_star = (q_next if cfg.double_q else q_target).argmax(dim=2)  # [S, H + 1]
            v_all = q_target.gather(2, a_star.unsqueeze(2)).squeeze(2)  # [S, H + 1]
            v = v_all.gather(1, boot)
            terminal = (boot == n[:, None]) & t[_SB.TERMINATEDS][last][:, None].bool()
            discount = torch.pow(torch.tensor(cfg.gamma, device=q.device), m.float())
            discount = torch.where(terminal, 0.0, discount)
            if cfg.value_rescaling:
                eps = cfg.value_rescaling_eps
                target = value_rescale(ret + discount * inverse_value_rescale(v, eps), eps)
            else:
                target = ret + discount * v
        trained = valid[:, :horizon]
        actions = t[_SB.ACTIONS][rows[:, :horizon]].long()
        q_taken = q[:, :horizon].gather(2, actions.unsqueeze(2)).squeeze(2)
        td = torch.where(trained, q_taken - target, 0.0)
        count = n.clamp(min=1).float()
        per_seq = 0.5 * (td * td).sum(dim=1) / count
        has_rows = n > 0
        weights = t[_SB.WEIGHTS][starts].float() if _SB.WEIGHTS in t else torch.ones_like(per_seq)
        loss = (weights * per_seq)[has_rows].sum() / has_rows.sum().clamp(min=1)
        if not with_stats:
            return loss, {}
        with torch.no_grad():
            abs_td = td.abs()
            eta = cfg.priority_eta
            priority = eta * abs_td.max(dim=1).values + (1.0 - eta) * abs_td.sum(dim=1) / count
            priority = torch.where(has_rows, priority, 0.0)
            rows_td = torch.repeat_interleave(priority, lens)
            num_trained = int(trained.sum())
        return loss, {
            "loss": loss.item(),
            "mean_q": float(q_taken.detach()[trained].mean()) if num_trained else math.nan,
            "mean_td_error": float(abs_td.sum()) / max(1, num_trained),
            "epsilon": self.epsilon,
            "num_sequences": float(starts.numel()),
            "num_burn_in_rows": float(burn.sum()),
            "td_error": rows_td.cpu().numpy().astype(np.float32),
        }

    def sequence_priorities(self, batch: SampleBatch) -> np.ndarray:
        """The priority of each sequence of a replayed ``batch`` (float32 ``[S]``, in row
        order), without an update: ``eta max + (1 - eta) mean`` of its |TD errors|."""
        with torch.no_grad():
            _, stats = self.compute_loss(self.tensors(batch))
        per_row: Any = stats["td_error"]
        return np.asarray(per_row)[np.asarray(batch[_SB.SEQ_LEN]) > 0]
