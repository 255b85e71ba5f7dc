"""MAML's learner: the inner policy-gradient step and the meta-update through it.

Finn, Abbeel & Levine 2017, Algorithm 3, with RLlib 1.x's choices
(``rllib/agents/maml/maml_torch_policy.py``). For a task ``T_i`` with the rollouts
``D_i^0`` sampled by the meta-policy ``pi_theta``, the inner step (``inner_adaptation_steps
= k`` of them, each on fresh rollouts ``D_i^j`` of the policy adapted ``j`` times) is plain
SGD on the vanilla policy-gradient loss::

    L_in(phi; D)    = -mean_t[ log pi_phi(a_t|s_t) * A_t ]
    phi_i^{j+1}     = phi_i^j - inner_lr * grad_phi L_in(phi_i^j; D_i^j),   phi_i^0 = theta

(``A_t``: the GAE advantages recorded when ``D`` was sampled, standardised over ``D`` when
``normalize_advantages``). The outer objective, on the rollouts ``D_i^k`` of the adapted
policy ``pi_{phi_i^k}``, is PPO's clipped surrogate (Schulman et al. 2017, eq. 7; RLlib's
choice, so that ``maml_optimizer_steps`` Adam steps can reuse one meta-batch) plus a value
loss::

    r_t        = exp(log pi_{phi_i^k(theta)}(a_t|s_t) - action_logp_t)
    L_out(theta) = mean_i[ -mean_t min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t)
                           + vf_loss_coeff * mean_t (V_{phi_i^k}(s_t) - G_t)^2 ]

Its gradient flows through ``phi_i^k(theta)``: the inner step is recomputed on the driver
from the same ``D_i^j`` with ``torch.func.functional_call`` and
``torch.autograd.grad(create_graph=True)``, so the meta-gradient holds the second-order
term ``(I - inner_lr * Hessian L_in)`` of Finn et al.'s eq. 1. On the first outer step
``phi_i^k(theta)`` is the policy that sampled ``D_i^k`` (``r_t = 1`` up to float rounding).
Like the original MAML (and RLlib), the gradient ignores how ``D_i^j`` depends on
``theta`` through sampling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.distributions import kl_divergence
from torch.func import functional_call

from plangraph.algorithms.maml.config import MAMLConfig
from plangraph.rl.actor_critic import ActorCriticPolicy, explained_variance
from plangraph.rl.policy import Stats
from plangraph.rl.postprocessing import Fragment, gae_columns
from plangraph.rl.sample_batch import SampleBatch

__all__ = ["MAMLPolicy", "Params"]

_SB = SampleBatch

Params = dict[str, torch.Tensor]
"""Model parameters by ``named_parameters()`` name (leaf parameters or functions of them)."""


class _PiVf(nn.Module):
    """``forward(obs) = model.pi_vf(obs)``: the module ``functional_call`` runs (the
    actor-critic models have no ``forward`` of their own)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.pi_vf(obs)  # type: ignore[operator]


class MAMLPolicy(ActorCriticPolicy[MAMLConfig]):
    """MAML's policy (losses in the module docstring). A rollout worker's copy adapts in
    place (:meth:`adapt_in_place`); the learner meta-updates (:meth:`meta_update`)."""

    config_type = MAMLConfig

    loss_columns = (
        _SB.OBS,
        _SB.ACTIONS,
        _SB.ACTION_LOGP,
        _SB.ACTION_DIST_INPUTS,
        _SB.ADVANTAGES,
        _SB.VALUE_TARGETS,
    )

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """GAE(lambda) advantages and value targets (``gae_columns``)."""
        return gae_columns(fragment, self.compute_values, self.config.gamma, self.config.gae_lambda)

    # --- the functional pieces ------------------------------------------------------
    def parameters_by_name(self) -> Params:
        """The model's trainable parameters by name (the leaves of the meta-gradient)."""
        return {k: p for k, p in self.model.named_parameters() if p.requires_grad}

    def forward_with(self, params: Params, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Distribution inputs float32 ``[B, num_dist_inputs]`` and values float32 ``[B]``
        of the model with ``params`` in place of its own (``torch.func.functional_call``:
        differentiable w.r.t. ``params``)."""
        out: tuple[torch.Tensor, torch.Tensor] = functional_call(
            _PiVf(self.model), {f"model.{k}": v for k, v in params.items()}, (obs,)
        )
        return out

    def _advantages(self, t: Mapping[str, torch.Tensor]) -> torch.Tensor:
        adv = t[_SB.ADVANTAGES].float()
        return self._normalize(adv) if self.config.normalize_advantages else adv

    def inner_loss(self, params: Params, t: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """``L_in = -mean[log pi_params(a|s) * A]`` on one task's batch ``t`` (a scalar)."""
        inputs, _ = self.forward_with(params, t[_SB.OBS])
        logp = self.dist(inputs).log_prob(t[_SB.ACTIONS])
        return -(logp * self._advantages(t)).mean()

    def adapt(
        self,
        params: Params,
        t: Mapping[str, torch.Tensor],
        create_graph: bool = False,
        loss: torch.Tensor | None = None,
    ) -> Params:
        """One inner SGD step: ``params - inner_lr * grad L_in(params; t)``.

        With ``create_graph`` the result stays a differentiable function of ``params``
        (second-order MAML); without, it is detached. Parameters the loss does not reach
        (a separate value network) come back unchanged. ``loss``: ``inner_loss(params, t)``
        when the caller has it already.
        """
        names = list(params)
        if loss is None:
            loss = self.inner_loss(params, t)
        grads = torch.autograd.grad(
            loss, [params[k] for k in names], create_graph=create_graph, allow_unused=True
        )
        lr = self.config.inner_lr
        out: Params = {}
        for k, g in zip(names, grads, strict=True):
            p = params[k]
            if g is None:
                out[k] = p
            else:
                out[k] = p - lr * g if create_graph else (p - lr * g).detach()
        return out

    def adapt_in_place(self, batch: SampleBatch) -> float:
        """One inner step on ``batch`` (one task's rollouts), written into this policy's
        weights (a rollout worker's copy: the next ``sample()`` acts with the adapted
        policy). Returns the inner loss before the step."""
        t = self.tensors(batch)
        with torch.enable_grad():
            params = self.parameters_by_name()
            loss_t = self.inner_loss(params, t)
            loss = float(loss_t.detach())
            adapted = self.adapt(params, t, create_graph=False, loss=loss_t)
        with torch.no_grad():
            for k, p in params.items():
                p.copy_(adapted[k])
        return loss

    def adapted_params(self, task: Sequence[Mapping[str, torch.Tensor]]) -> Params:
        """``phi^k(theta)``: the ``k = len(task) - 1`` inner steps on ``task[0..k-1]`` from
        this policy's parameters, differentiable w.r.t. them."""
        params = self.parameters_by_name()
        for t in task[:-1]:
            params = self.adapt(params, t, create_graph=True)
        return params

    # --- the outer loss ---------------------------------------------------------------
    def meta_loss(
        self, tasks: Sequence[Sequence[Mapping[str, torch.Tensor]]], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        """``L_out`` over ``tasks`` (each: the tensors of ``D^0 .. D^k``; see the module
        docstring), a scalar differentiable w.r.t. this policy's parameters."""
        cfg = self.config
        totals: list[torch.Tensor] = []
        acc: dict[str, float] = {}
        for task in tasks:
            params = self.adapted_params(task)
            post = task[-1]
            inputs, values = self.forward_with(params, post[_SB.OBS])
            dist = self.dist(inputs)
            logp = dist.log_prob(post[_SB.ACTIONS])
            ratio = torch.exp(logp - post[_SB.ACTION_LOGP].float())
            adv = self._advantages(post)
            surrogate = torch.min(
                ratio * adv, torch.clamp(ratio, 1.0 - cfg.clip_param, 1.0 + cfg.clip_param) * adv
            )
            policy_loss = -surrogate.mean()
            targets = post[_SB.VALUE_TARGETS].float()
            vf_loss = ((values - targets) ** 2).mean()
            totals.append(policy_loss + cfg.vf_loss_coeff * vf_loss)
            if with_stats:
                with torch.no_grad():
                    old = self.dist(post[_SB.ACTION_DIST_INPUTS].float())
                    stats = {
                        "policy_loss": float(policy_loss),
                        "vf_loss": float(vf_loss),
                        "kl": float(kl_divergence(old, dist).mean()),
                        "clip_frac": float(((ratio - 1.0).abs() > cfg.clip_param).float().mean()),
                        "entropy": float(dist.entropy().mean()),
                        "vf_explained_var": explained_variance(values.detach(), targets),
                    }
                for k, v in stats.items():
                    acc[k] = acc.get(k, 0.0) + v / len(tasks)
        total = torch.stack(totals).mean()
        if with_stats:
            acc["total_loss"] = float(total.detach())
        return total, acc

    def meta_update(self, tasks: Sequence[Sequence[SampleBatch]]) -> Stats:
        """``maml_optimizer_steps`` Adam steps on ``L_out`` of one meta-batch.

        Args:
            tasks: per task, its batches ``D^0 .. D^k`` (``k = inner_adaptation_steps``),
                each postprocessed by a rollout worker (``advantages``, ``action_logp``).

        Returns:
            The last step's stats (means over tasks), ``inner_loss`` (the mean ``L_in`` on
            ``D^0`` at the meta-parameters before the update), ``grad_gnorm``, ``cur_lr``.

        Raises:
            ValueError: no tasks, or tasks of other than ``inner_adaptation_steps + 1``
                batches.
        """
        k = self.config.inner_adaptation_steps
        if not tasks:
            raise ValueError("meta_update needs at least one task")
        bad = [len(task) for task in tasks if len(task) != k + 1]
        if bad:
            raise ValueError(
                f"each task needs {k + 1} batches (inner_adaptation_steps = {k}, plus the "
                f"adapted policy's), got {bad[0]}"
            )
        ts = [[self.tensors(b) for b in task] for task in tasks]
        with torch.no_grad():
            base = self.parameters_by_name()
            inner = float(np.mean([float(self.inner_loss(base, task[0])) for task in ts]))
        stats: Stats = {}
        steps = self.config.maml_optimizer_steps
        for step in range(steps):
            last = step == steps - 1
            total, loss_stats = self.meta_loss(ts, with_stats=last)
            grads = torch.autograd.grad(total, self._params, allow_unused=True)
            dense = [
                torch.zeros_like(p) if g is None else g
                for g, p in zip(grads, self._params, strict=True)
            ]
            applied = self._apply({"optimizer": dense}, with_stats=last)
            if last:
                stats = {**loss_stats, **applied}
        stats["inner_loss"] = inner
        stats["num_env_steps_trained"] = sum(b.count for task in tasks for b in task)
        return stats

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        """Without adaptation (``TrainOneStep``, ``ComputeGradients``): the inner loss at
        the current parameters plus the value loss, a plain policy gradient."""
        params = self.parameters_by_name()
        inputs, values = self.forward_with(params, t[_SB.OBS])
        logp = self.dist(inputs).log_prob(t[_SB.ACTIONS])
        policy_loss = -(logp * self._advantages(t)).mean()
        vf_loss = ((values - t[_SB.VALUE_TARGETS].float()) ** 2).mean()
        total = policy_loss + self.config.vf_loss_coeff * vf_loss
        if not with_stats:
            return total, {}
        return total, {
            "policy_loss": float(policy_loss.detach()),
            "vf_loss": float(vf_loss.detach()),
        }
