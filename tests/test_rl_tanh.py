"""The MLPs' tanh (``plangraph.rl.tanh``): numpy's kernel where torch's runs MKL's generic
code, with torch's values and gradients to float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from plangraph.rl import tanh as tanh_mod
from plangraph.rl.models import ActorCritic, mlp_forward
from plangraph.rl.tanh import Tanh, numpy_tanh, tanh


def _x(requires_grad: bool = False) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(256, 64, generator=gen) * 3.0
    return x.requires_grad_(requires_grad)


def test_numpy_tanh_gives_torchs_values_and_gradient() -> None:
    x = _x(requires_grad=True)
    grad_out = torch.randn(256, 64, generator=torch.Generator().manual_seed(1))
    y = numpy_tanh(x)
    (grad,) = torch.autograd.grad(y, x, grad_out)
    y_ref = torch.tanh(x)
    (grad_ref,) = torch.autograd.grad(y_ref, x, grad_out)
    assert y.dtype == torch.float32 and y.shape == x.shape and y.grad_fn is not None
    torch.testing.assert_close(y, y_ref.detach(), rtol=0, atol=2e-7)
    torch.testing.assert_close(grad, grad_ref, rtol=0, atol=2e-6)
    # The values are numpy's, bit for bit: those of the rollout workers' numpy policy.
    assert np.array_equal(y.detach().numpy(), np.tanh(x.detach().numpy()))


def test_numpy_tanh_without_grad_builds_no_graph_and_keeps_shapes() -> None:
    x = _x(requires_grad=True)
    with torch.no_grad():
        y = numpy_tanh(x)
    assert y.grad_fn is None and not y.requires_grad
    strided = _x()[:, ::2]  # not contiguous
    assert np.array_equal(numpy_tanh(strided).numpy(), np.tanh(strided.numpy()))


def test_a_second_derivative_through_numpy_tanh_raises() -> None:
    x = _x(requires_grad=True)
    (grad,) = torch.autograd.grad(numpy_tanh(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(grad.sum(), x)


def test_tanh_takes_numpys_kernel_only_for_float32_cpu_tensors_where_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = _x(requires_grad=True)
    monkeypatch.setattr(tanh_mod, "NUMPY_TANH", True)
    assert type(tanh(x).grad_fn).__name__ == "_NumpyTanhBackward"
    assert type(tanh(x.double()).grad_fn).__name__ == "TanhBackward0"
    monkeypatch.setattr(tanh_mod, "NUMPY_TANH", False)
    assert type(tanh(x).grad_fn).__name__ == "TanhBackward0"


@pytest.mark.parametrize(
    ("mkl", "vendor", "expected"),
    [
        (True, "AuthenticAMD", True),
        (True, "HygonGenuine", True),
        (True, "GenuineIntel", False),
        (False, "AuthenticAMD", False),  # no MKL (aarch64, macOS): torch's own kernels
        (True, None, False),  # no /proc/cpuinfo: keep torch's
    ],
)
def test_numpys_kernel_is_chosen_for_mkl_on_cpus_of_other_vendors_than_intel(
    monkeypatch: pytest.MonkeyPatch, mkl: bool, vendor: str | None, expected: bool
) -> None:
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: mkl)
    monkeypatch.setattr(tanh_mod, "_cpu_vendor", lambda: vendor)
    assert tanh_mod._mkl_runs_generic_code() is expected


def test_the_cpu_vendor_is_read_from_proc_cpuinfo() -> None:
    vendor = tanh_mod._cpu_vendor()
    try:
        text = open("/proc/cpuinfo", encoding="ascii", errors="replace").read()
    except OSError:
        assert vendor is None
        return
    assert vendor is not None and f"vendor_id\t: {vendor}" in text


def test_the_mlps_use_it_and_keep_nn_tanhs_state_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tanh_mod, "NUMPY_TANH", True)
    torch.manual_seed(0)
    model = ActorCritic(4, 2, (64, 64), "tanh")
    assert isinstance(model.pi_net[1], Tanh) and isinstance(model.pi_net[1], torch.nn.Tanh)
    obs = torch.randn(32, 4)
    out = model.pi(obs)
    # The same layers by hand, with numpy's tanh.
    h = obs
    for layer in model.pi_net:
        if isinstance(layer, torch.nn.Linear):
            h = torch.nn.functional.linear(h, layer.weight, layer.bias)
        else:
            h = torch.from_numpy(np.tanh(h.detach().numpy()))
    assert torch.equal(out.detach(), h.detach())
    assert torch.equal(mlp_forward(model.pi_net, obs), model.pi_net(obs))
    keys = set(model.state_dict())
    assert keys == {
        f"{n}_net.{i}.{p}" for n in ("pi", "vf") for i in (0, 2, 4) for p in ("weight", "bias")
    }
