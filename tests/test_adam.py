"""The learner's Adam against ``torch.optim.Adam``: the same numbers, the same state dict,
and no ``torch._dynamo`` import anywhere in a learner's life."""

from __future__ import annotations

import copy

import pytest
import torch

from plangraph.rl.adam import Adam
from tests.fresh_python import run_python


def _params(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    shapes = [(8, 4), (8,), (2, 8)]
    return [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]


def _drive(
    opt: Adam | torch.optim.Adam, params: list[torch.nn.Parameter], steps: range, seed: int
) -> None:
    """Gradients from a seeded stream; the second parameter has none every third step, and
    the learning rate changes halfway, as the lr schedule changes it."""
    gen = torch.Generator().manual_seed(seed)
    for i in steps:
        for j, p in enumerate(params):
            g = torch.randn(p.shape, generator=gen)
            p.grad = None if (j == 1 and i % 3 == 0) else g
        if i == 10:
            for group in opt.param_groups:
                group["lr"] = 5e-4
        opt.step()
        opt.zero_grad(set_to_none=True)


def _assert_same_state(ours: dict, theirs: dict) -> None:
    assert ours["param_groups"] == theirs["param_groups"]
    assert ours["state"].keys() == theirs["state"].keys()
    for i, state in theirs["state"].items():
        assert ours["state"][i].keys() == state.keys()
        for key, value in state.items():
            mine = ours["state"][i][key]
            assert (mine.dtype, mine.device, mine.shape) == (value.dtype, value.device, value.shape)
            assert torch.equal(mine, value), (i, key)


@pytest.mark.parametrize("fused", [None, False])
def test_steps_and_state_dict_match_torch_adam_bit_for_bit(fused: bool | None) -> None:
    ours_params, torch_params = _params(0), _params(0)
    ours = Adam(ours_params, lr=1e-3, eps=1e-5, fused=fused)
    reference = torch.optim.Adam(
        torch_params, lr=1e-3, eps=1e-5, fused=True if fused is None else None
    )
    # Before any step both hold no state, only the group.
    _assert_same_state(ours.state_dict(), reference.state_dict())
    _drive(ours, ours_params, range(20), seed=1)
    _drive(reference, torch_params, range(20), seed=1)
    for mine, theirs in zip(ours_params, torch_params, strict=True):
        assert torch.equal(mine, theirs)
    _assert_same_state(ours.state_dict(), reference.state_dict())
    assert ours.state_dict()["state"][1]["step"].item() == 13  # no grad on 7 of 20 steps


@pytest.mark.parametrize("direction", ["torch into ours", "ours into torch"])
def test_state_dicts_load_across_and_training_goes_on_identically(direction: str) -> None:
    first, second = _params(0), _params(0)
    ours, reference = (
        Adam(first, lr=1e-3, eps=1e-5),
        torch.optim.Adam(second, lr=1e-3, eps=1e-5, fused=True),
    )
    source, target = (reference, ours) if direction == "torch into ours" else (ours, reference)
    source_params = second if source is reference else first
    target_params = first if source is reference else second
    _drive(source, source_params, range(12), seed=2)
    with torch.no_grad():
        for t, s in zip(target_params, source_params, strict=True):
            t.copy_(s)
    # A copy, as the policies load it: like torch, loading keeps same-dtype tensors as given.
    target.load_state_dict(copy.deepcopy(source.state_dict()))
    _assert_same_state(ours.state_dict(), reference.state_dict())
    _drive(source, source_params, range(12, 20), seed=3)
    _drive(target, target_params, range(12, 20), seed=3)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
    _assert_same_state(ours.state_dict(), reference.state_dict())


def test_loading_moments_casts_them_to_each_parameters_dtype() -> None:
    params = [torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))]
    opt = Adam(params, lr=1e-3)
    opt.load_state_dict(
        {
            "state": {
                0: {
                    "step": torch.tensor(4.0),
                    "exp_avg": torch.ones(3),
                    "exp_avg_sq": torch.ones(3),
                }
            },
            "param_groups": [{**opt.state_dict()["param_groups"][0], "lr": 0.25}],
        }
    )
    state = opt.state[params[0]]
    assert state["exp_avg"].dtype == torch.float64 and state["step"].dtype == torch.float32
    assert opt.param_groups[0]["lr"] == 0.25 and opt.param_groups[0]["params"] == params


def test_bad_arguments_and_foreign_state_dicts_are_refused() -> None:
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([], lr=1e-3)
    with pytest.raises(ValueError, match="floating-point"):
        Adam([torch.nn.Parameter(torch.zeros(2, dtype=torch.complex64))], lr=1e-3)
    with pytest.raises(ValueError, match="lr >= 0"):
        Adam(_params(0), lr=-1.0)
    with pytest.raises(ValueError, match="betas"):
        Adam(_params(0), lr=1e-3, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="no fused Adam kernel"):
        Adam([torch.nn.Parameter(torch.zeros(2, device="meta"))], lr=1e-3, fused=True)
    three = Adam(_params(0), lr=1e-3)
    with pytest.raises(ValueError, match=r"sizes \[2\]; this optimizer has one group of 3"):
        three.load_state_dict(torch.optim.Adam(_params(0)[:2]).state_dict())


def test_a_learner_never_imports_torch_dynamo() -> None:
    """Every torch policy built and trained on a real batch, in a fresh interpreter: the
    import this class exists to avoid (seconds of start-up) must not come back."""
    code = """
import sys
import torch
from plangraph.rl.rollout_worker import RolloutWorker
for env, config in [("CartPole-v1", {"algo": "ppo"}),
                    ("CartPole-v1", {"algo": "dqn"}), ("CartPole-v1", {"algo": "a2c"}),
                    ("CartPole-v1", {"algo": "impala"}), ("CartPole-v1", {"algo": "appo"}),
                    ("Pendulum-v1", {"algo": "sac", "hiddens": [16, 16]})]:
    worker = RolloutWorker(env, 2, 32, config, seed=0)
    batch = worker.sample()
    if config["algo"] == "dqn":
        batch["weights"] = torch.ones(len(batch)).numpy()
    stats = worker.policy.learn_on_batch(batch)
    if config["algo"] == "ppo":
        stats = worker.policy.train(batch, 2, 16)  # SGD epochs over minibatches
    state = worker.policy.get_state()
    worker.policy.set_state(state)
    assert stats, config
print(sorted(m for m in sys.modules if m.startswith("torch._dynamo")))
"""
    assert run_python(code).strip() == "[]"
