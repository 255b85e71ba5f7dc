"""The MLPs' tanh: numpy's kernel where torch's CPU tanh runs MKL's generic code.

In torch builds with MKL (the x86-64 wheels), ``torch.tanh`` of a float CPU tensor calls
MKL's vector math (``vsTanh``), and MKL picks its vectorised code by CPU vendor: on other
vendors' CPUs it runs a generic path. On this project's AMD EPYC (Zen 5) host,
``torch.tanh`` of a float32 ``[256, 64]`` tensor takes 42 us and numpy's ``np.tanh`` (its
own SIMD loops) 4 us; a PPO minibatch update of the plans' 64x64 tanh MLPs spends a sixth of
its time there. ``tanh`` below takes numpy's kernel for float32 CPU tensors when torch
has MKL and the CPU's vendor is not Intel (``NUMPY_TANH``), and ``torch.tanh`` otherwise.

Numpy's results differ from MKL's by at most one unit in the last place, and they are
the rollout workers' (``plangraph.rl.numpy_policy`` computes its tanh with numpy). The
gradient is torch's own ``tanh_backward`` of the output, ``grad * (1 - y^2)``, as in
``torch.tanh``'s backward. Once differentiable: a second derivative through it raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.autograd.function import once_differentiable

__all__ = ["NUMPY_TANH", "Tanh", "numpy_tanh", "tanh"]


def _cpu_vendor() -> str | None:
    """``vendor_id`` of the first CPU in ``/proc/cpuinfo`` (``GenuineIntel``,
    ``AuthenticAMD``, ...), or None where there is no such file or field."""
    try:
        with Path("/proc/cpuinfo").open(encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return None


def _mkl_runs_generic_code() -> bool:
    vendor = _cpu_vendor()
    return torch.backends.mkl.is_available() and vendor is not None and vendor != "GenuineIntel"


NUMPY_TANH: bool = _mkl_runs_generic_code()
"""Whether ``tanh`` takes numpy's kernel for float32 CPU tensors on this machine."""


class _NumpyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.from_numpy(np.tanh(x.detach().numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


def numpy_tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)`` by numpy's kernel, differentiable once (float32 CPU ``x`` of any shape;
    returns a new float32 tensor of the same shape)."""
    if x.requires_grad and torch.is_grad_enabled():
        return _NumpyTanh.apply(x)
    return torch.from_numpy(np.tanh(x.detach().numpy()))


def tanh(x: torch.Tensor) -> torch.Tensor:
    """Elementwise tanh of ``x`` (any shape, dtype and device), differentiable: numpy's
    kernel for a float32 CPU tensor where ``NUMPY_TANH``, else ``torch.tanh``."""
    if NUMPY_TANH and x.dtype == torch.float32 and x.device.type == "cpu":
        return numpy_tanh(x)
    return torch.tanh(x)


class Tanh(nn.Tanh):
    """``nn.Tanh`` computed by ``tanh`` above (no parameters, the same state dict)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return tanh(input)
