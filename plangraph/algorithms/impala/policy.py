"""IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

The rollout worker records the behaviour log-probs ``action_logp`` (``log mu``) and marks
the segment structure explicitly (``segment_ends``, ``next_obs``: see ``RolloutWorker``);
everything V-trace needs from the target policy is computed here, on the learner, with its
*current* networks. Per (mini)batch of ``B`` rows, all of whole segments:

    target_logp_s = log pi(a_s|x_s)                       (current policy, no grad)
    V(x_s)                                                (current value function)
    bootstrap     = 0 if terminated, else V(next_obs)     (on segment ends only, no grad)
    discount_s    = gamma * (1 - terminated_s)
    v_s, A_s      = vtrace(...)                           (``plangraph.rl.vtrace``, eq. 1 and
                                                           sec. 4.2; A_s includes rho^pg_s)

    L = -mean_s[ A_s * log pi(a_s|x_s) ]                  (policy gradient, sec. 4.2)
        + vf_loss_coeff * mean_s[ 0.5 * (v_s - V(x_s))^2 ] (value regression on v_s, sec. 4.1)
        - entropy_coeff * mean_s[ H(pi(.|x_s)) ]          (entropy bonus, sec. 4.3)

``v_s`` and ``A_s`` are constants of the loss (stop-gradient). The terms are means over
rows where RLlib's ``vtrace_torch_policy`` takes sums: the learning rate then does not
depend on the train batch size (with Adam the two differ only through ``grad_clip``).

Minibatches. ``train(batch, num_sgd_iter, sgd_minibatch_size)`` keeps segments intact:
each epoch shuffles *segments* (not rows) and fills each minibatch with whole segments
until it holds at least ``sgd_minibatch_size`` rows (the last one holds the remainder),
and V-trace is recomputed on every minibatch from the networks as they are at that step,
as RLlib's IMPALA/APPO learner does with its time-major sequences. Shuffling rows would
separate a row from the rows its trace sums over.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

import numpy as np
import torch

from plangraph.algorithms.impala.config import IMPALAConfig, VTraceConfig
from plangraph.algorithms.impala.vtrace import VTraceReturns, vtrace
from plangraph.rl.actor_critic import ActorCriticPolicy, explained_variance
from plangraph.rl.policy import Stats
from plangraph.rl.postprocessing import Fragment, segment_columns
from plangraph.rl.sample_batch import SampleBatch

_SB = SampleBatch

VTraceConfigT = TypeVar("VTraceConfigT", bound=VTraceConfig, covariant=True)


class VTracePolicy(ActorCriticPolicy[VTraceConfigT]):
    """What the V-trace learners (``IMPALAPolicy``, ``APPOPolicy``) share: V-trace of
    whole segments and minibatches of whole segments (module docstring).

    Batches need the columns ``obs, actions, rewards, terminateds, action_logp, next_obs,
    segment_ends`` (what ``RolloutWorker.sample()`` emits for ``algo="impala"`` and
    ``"appo"``), with every segment whole: the last row of the batch must be a segment end.
    """

    loss_columns = (
        _SB.OBS,
        _SB.ACTIONS,
        _SB.REWARDS,
        _SB.TERMINATEDS,
        _SB.ACTION_LOGP,
        _SB.NEXT_OBS,
        _SB.SEGMENT_ENDS,
    )

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """No advantages (V-trace runs on the learner): the segment structure
        (``segment_columns``)."""
        return segment_columns(fragment)

    def _vtrace(
        self, t: Mapping[str, torch.Tensor], target_logp: torch.Tensor, values: torch.Tensor
    ) -> VTraceReturns:
        """V-trace of one (mini)batch of whole segments.

        Args:
            t: the loss columns as tensors.
            target_logp: float32 ``[B]`` ``log pi(a_s|x_s)`` of the V-trace target policy.
            values: float32 ``[B]`` ``V(x_s)`` of the current value function.
        """
        cfg = self.config
        with torch.no_grad():
            ends = t[_SB.SEGMENT_ENDS].bool()
            terminated = t[_SB.TERMINATEDS].bool()
            values = values.detach()
            bootstrap = torch.zeros_like(values)
            # V(final obs) on truncation, V(next obs) at a fragment cut; 0 on termination.
            need = ends & ~terminated
            if bool(need.any()):
                bootstrap[need] = self.model.vf(t[_SB.NEXT_OBS][need])
            discounts = cfg.gamma * (~terminated).to(values.dtype)
            return vtrace(
                t[_SB.ACTION_LOGP].float(),
                target_logp.detach(),
                t[_SB.REWARDS].float(),
                discounts,
                values,
                bootstrap,
                ends,
                clip_rho_threshold=cfg.vtrace_clip_rho_threshold,
                clip_pg_rho_threshold=cfg.vtrace_clip_pg_rho_threshold,
                clip_c_threshold=cfg.vtrace_clip_c_threshold,
            )

    def compute_vtrace(self, batch: SampleBatch) -> VTraceReturns:
        """V-trace of ``batch`` under the current networks (no optimizer step).

        Returns:
            ``VTraceReturns`` with float32 ``[B]`` fields (``vs``, ``pg_advantages``, ...).

        Raises:
            KeyError: a loss column is missing.
            ValueError: the batch's last row does not end a segment.
        """
        t = self.tensors(batch)
        with torch.no_grad():
            inputs, values = self.model.pi_vf(t[_SB.OBS])
            return self._vtrace(t, self.dist(inputs).log_prob(t[_SB.ACTIONS]), values)

    def _minibatch_indices(self, batch: SampleBatch, size: int) -> Iterator[np.ndarray]:
        """Minibatches of whole segments in shuffled segment order (module docstring).

        Raises:
            KeyError: the batch has no ``segment_ends`` column.
            ValueError: the batch's last row does not end a segment.
        """
        ends = np.asarray(self._segment_ends(batch))
        if size <= 0 or size >= batch.count:
            yield np.arange(batch.count)
            return
        last = np.flatnonzero(ends)
        first = np.concatenate(([0], last[:-1] + 1))
        perm = self._sgd_rng.permutation(last.size)
        pieces: list[np.ndarray] = []
        rows = 0
        for j in perm:
            pieces.append(np.arange(first[j], last[j] + 1))
            rows += pieces[-1].size
            if rows >= size:
                yield np.concatenate(pieces)
                pieces, rows = [], 0
        if pieces:
            yield np.concatenate(pieces)

    def _segment_ends(self, batch: SampleBatch) -> np.ndarray:
        if _SB.SEGMENT_ENDS not in batch:
            raise KeyError(
                f"{type(self).__name__} needs the column {_SB.SEGMENT_ENDS!r} (batch has "
                f"{sorted(batch.keys())}); was the batch sampled for algo={self.config.algo!r}?"
            )
        ends = np.asarray(batch[_SB.SEGMENT_ENDS], dtype=bool)
        if batch.count and not ends[-1]:
            raise ValueError(
                "the last row of the batch must end a segment (segment_ends[-1] is False); "
                "train on whole worker fragments or their concatenation"
            )
        return ends


class IMPALAPolicy(VTracePolicy[IMPALAConfig]):
    """IMPALA policy (V-trace actor-critic); loss in the module docstring, batches as
    ``VTracePolicy``."""

    config_type = IMPALAConfig

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        cfg = self.config
        inputs, values = self.model.pi_vf(t[_SB.OBS])
        dist = self.dist(inputs)
        logp = dist.log_prob(t[_SB.ACTIONS])
        vt = self._vtrace(t, logp, values)
        policy_loss = -(logp * vt.pg_advantages).mean()
        vf_loss = 0.5 * torch.mean((vt.vs - values) ** 2)
        entropy = dist.entropy().mean()
        total = policy_loss + cfg.vf_loss_coeff * vf_loss - cfg.entropy_coeff * entropy
        if not with_stats:
            return total, {}
        return total, {
            "total_loss": total.item(),
            "policy_loss": policy_loss.item(),
            "vf_loss": vf_loss.item(),
            "entropy": entropy.item(),
            "vf_explained_var": vf_explained_variance(values.detach(), vt.vs),
            **importance_ratio_stats(vt, cfg.vtrace_clip_rho_threshold),
        }


def vf_explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``explained_variance``, 0.0 for fewer than 2 rows (a 1-row remainder minibatch)."""
    return explained_variance(pred, target) if target.numel() > 1 else 0.0


def importance_ratio_stats(vt: VTraceReturns, rho_bar: float | None) -> Stats:
    """Mean importance ratio pi/mu and the fraction of rows where rho_bar clips it."""
    rhos = torch.exp(vt.log_rhos)
    clipped = 0.0 if rho_bar is None else float((rhos > rho_bar).float().mean())
    return {"mean_is_ratio": float(rhos.mean()), "is_ratio_clip_frac": clipped}
