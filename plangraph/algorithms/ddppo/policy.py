"""DD-PPO's learner: PPO's (``plangraph.algorithms.ppo.policy.PPOPolicy``: the clipped
surrogate, the value loss, GAE(lambda) postprocessing), with each optimizer step taken on
the gradients averaged over the rollout workers' process group (Wijmans et al. 2020,
sec. 3: "each worker ... computes gradients ... then all-reduces them").

Per minibatch, with ``g_k`` the raw gradient of rank ``k``'s loss on its own minibatch
(all parameters flattened into one float32 vector) and ``W`` the world size::

    g = (1 / W) * sum_k g_k          (one ``torch.distributed.all_reduce``, SUM, then / W)

then the usual step (clip the global L2 norm of ``g`` to ``grad_clip``, one optimizer
step). Every rank receives the same reduced vector (gloo's all-reduce hands each rank the
same result), divides it the same way and steps the same optimizer state, so ranks that
start from the same weights and optimizer state stay bit-for-bit identical
(``plangraph.algorithms.ddppo.distributed.join_group`` broadcasts rank 0's at set-up).
Outside a process group (the driver's copy, a test) it is PPO's policy unchanged.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from plangraph.algorithms.ddppo.config import DDPPOConfig
from plangraph.algorithms.ppo.policy import PPOPolicy
from plangraph.rl.all_reduce import all_reduce
from plangraph.rl.policy import Stats

__all__ = ["DDPPOPolicy", "all_reduce_mean"]


def all_reduce_mean(grads: dict[str, list[torch.Tensor]]) -> dict[str, list[torch.Tensor]]:
    """``grads`` (per optimizer, per parameter, any shapes) averaged over the default
    process group: one all-reduce of all of them flattened into one vector.

    Raises:
        ProcessGroupError: a peer left the group or did not answer within the group's
            timeout (``plangraph.rl.all_reduce.all_reduce``).
    """
    flat = [g for gs in grads.values() for g in gs]
    if not flat:
        return grads
    buf = torch.cat([g.detach().reshape(-1) for g in flat])
    all_reduce(buf)
    buf.div_(dist.get_world_size())
    out: dict[str, list[torch.Tensor]] = {}
    start = 0
    for name, gs in grads.items():
        out[name] = []
        for g in gs:
            n = g.numel()
            out[name].append(buf[start : start + n].view_as(g))
            start += n
    return out


class DDPPOPolicy(PPOPolicy):
    """PPO's policy whose optimizer steps use gradients averaged over the process group
    (module docstring); PPO's alone outside one."""

    config_type = DDPPOConfig
    #: ``plangraph.rl.all_reduce.join_group`` trains only policies that average over the group
    all_reduces_gradients = True

    def _apply(self, grads: dict[str, list[torch.Tensor]], with_stats: bool = True) -> Stats:
        if dist.is_available() and dist.is_initialized():
            grads = all_reduce_mean(grads)
        return super()._apply(grads, with_stats)
