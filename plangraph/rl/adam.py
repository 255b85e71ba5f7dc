"""The learner's Adam: torch's Adam update and ``torch.optim.Adam``'s state, without
``torch.optim.Optimizer``.

Why not ``torch.optim.Adam`` itself: constructing any ``torch.optim.Optimizer`` imports
``torch._dynamo`` (``add_param_group`` is wrapped by ``torch._disable_dynamo``, which
imports the compiler on its first call, and ``step`` does the same through
``_use_grad_for_differentiable``). That import brings torch.fx, sympy and the inductor's
configuration, for a compiler the learner never calls: 2.9 s of CPU on its own on the slow
2-core host of 2026-12-02, where it took the driver's CPU in ``plangraph run plans/ppo.json
--max-iterations 1`` from 7.1 to 5.1 s (``tools/bench_startup.py --cpu``).

What stays torch's: the arithmetic is ``torch.optim.adam.adam``, torch's functional Adam
(its ``__all__``; Kingma & Ba 2015, Algorithm 1), with the fused kernel where the device
has one, so the parameters, moments and step counts are bit for bit those of
``torch.optim.Adam(params, lr, betas, eps, fused=...)`` (``tests/test_adam.py`` steps
both side by side). ``state_dict()`` has ``torch.optim.Adam``'s layout (the same keys,
dtypes and devices, state created at a parameter's first step), so checkpoints written
with either load into the other.

This class holds one parameter group and only what the learner uses: ``step``,
``zero_grad``, ``param_groups[i]["lr"]`` (the lr schedule sets it) and the state dict;
no hooks, closures, AMSGrad or weight decay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.optim.adam import adam as adam_update

FUSED_DEVICE_TYPES = frozenset({"cpu", "cuda", "mps", "xpu"})
"""Device types where torch has a fused Adam kernel (for floating-point parameters)."""


class Adam:
    """Adam over one group of parameters, as ``torch.optim.Adam`` computes and saves it.

    Args:
        params: the parameters to update (each float32/float16/bfloat16, any shape).
        lr: learning rate (per optimizer step); ``param_groups[0]["lr"]`` may change it.
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator (``sqrt(v_hat) + eps``).
        fused: torch's fused kernel (one call for all parameters); ``None``: where the
            parameters' device has one, else torch's default (``foreach``) loop.

    Raises:
        ValueError: no parameters, a parameter that is not floating point, a negative
            ``lr``/``eps`` or a beta outside ``[0, 1)``; ``fused=True`` on a device
            without the kernel.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        fused: bool | None = None,
    ) -> None:
        params = list(params)
        if not params:
            raise ValueError("Adam got an empty parameter list")
        if lr < 0.0 or eps < 0.0:
            raise ValueError(f"Adam needs lr >= 0 and eps >= 0, got lr={lr}, eps={eps}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam needs betas in [0, 1), got {betas}")
        if not all(p.is_floating_point() for p in params):
            # torch.optim.Adam steps complex parameters as real views; this class does not.
            raise ValueError("Adam here takes floating-point parameters only")
        can_fuse = all(p.device.type in FUSED_DEVICE_TYPES for p in params)
        if fused and not can_fuse:
            devices = sorted({p.device.type for p in params})
            raise ValueError(f"torch has no fused Adam kernel for devices {devices}")
        fused = can_fuse if fused is None else fused
        # torch.optim.Adam's group keys (and values), so that the state dicts match.
        self.param_groups: list[dict[str, Any]] = [
            {
                "lr": float(lr),
                "betas": (float(betas[0]), float(betas[1])),
                "eps": float(eps),
                "weight_decay": 0,
                "amsgrad": False,
                "maximize": False,
                "foreach": None,
                "capturable": False,
                "differentiable": False,
                "fused": True if fused else None,  # torch.optim.Adam's default: None
                "decoupled_weight_decay": False,
                "params": params,
            }
        ]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter whose ``.grad`` is set (the others keep their
        value and moments, as in torch)."""
        group = self.param_groups[0]
        params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = self._new_state(p, bool(group["fused"]))
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        adam_update(
            params,
            grads,
            exp_avgs,
            exp_avg_sqs,
            [],
            steps,
            foreach=group["foreach"],
            fused=group["fused"],
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=0.0,
            eps=group["eps"],
            maximize=False,
        )

    @staticmethod
    def _new_state(p: torch.Tensor, fused: bool) -> dict[str, torch.Tensor]:
        # torch keeps a fused optimizer's step count on the parameter's device as float32,
        # an unfused one's on the CPU (torch.optim.adam.Adam._init_group).
        step = (
            torch.zeros((), dtype=torch.float32, device=p.device)
            if fused
            else torch.tensor(0.0, dtype=torch.get_default_dtype())
        )
        return {
            "step": step,
            "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
            "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
        }

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's ``.grad`` (``set_to_none=False``: zero it in place)."""
        for p in self.param_groups[0]["params"]:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [...]}``
        as ``torch.optim.Adam.state_dict()`` returns it: parameters by their index, the
        state tensors themselves (not copies)."""
        group = self.param_groups[0]
        params = group["params"]
        return {
            "state": {i: dict(self.state[p]) for i, p in enumerate(params) if p in self.state},
            "param_groups": [
                {
                    **{k: v for k, v in group.items() if k != "params"},
                    "params": list(range(len(params))),
                }
            ],
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore ``state_dict()`` (this class's or ``torch.optim.Adam``'s), casting the
        moments to each parameter's dtype and device as torch does.

        Raises:
            ValueError: the state dict is of another number of groups or parameters.
        """
        groups = state_dict["param_groups"]
        params = self.param_groups[0]["params"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(params):
            sizes = [len(g["params"]) for g in groups]
            raise ValueError(
                f"the optimizer state is for parameter groups of sizes {sizes}; this "
                f"optimizer has one group of {len(params)} parameters"
            )
        saved = groups[0]
        index = {saved_id: params[i] for i, saved_id in enumerate(saved["params"])}
        fused = bool(saved.get("fused")) or bool(saved.get("capturable"))
        self.state = {}
        for saved_id, values in state_dict["state"].items():
            p = index[saved_id]
            self.state[p] = {
                key: _cast_state(p, key, value, fused) for key, value in values.items()
            }
        self.param_groups = [{**saved, "params": params}]


def _cast_state(p: torch.Tensor, key: str, value: Any, fused: bool) -> Any:
    """One loaded state value as ``torch.optim.Optimizer.load_state_dict`` casts it."""
    if not isinstance(value, torch.Tensor):
        return value
    if key == "step":
        # an unfused step count stays where it was saved (the CPU); torch issue 74424
        return value.to(dtype=torch.float32, device=p.device) if fused else value
    if p.is_floating_point():
        return value.to(dtype=p.dtype, device=p.device)
    return value.to(device=p.device)
