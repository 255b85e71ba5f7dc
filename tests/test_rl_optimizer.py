"""The learner's optimizer is ``torch.optim.Adam`` with the fused kernel, and its state
survives a checkpoint: saved in the data-only format, loaded into a fresh policy, the
training goes on bit for bit as if it had never stopped, also from a state dict in the
layout that checkpoints written before this optimizer was torch's own hold."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from plangraph.rl.policies import make_policy
from plangraph.rl.policy import TorchPolicy
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.runtime.checkpoint import read_state, write_state


def _assert_same_weights(a: TorchPolicy, b: TorchPolicy) -> None:
    wa, wb = a.get_weights(), b.get_weights()
    assert wa.keys() == wb.keys()
    for name in wa:
        np.testing.assert_array_equal(wa[name], wb[name], err_msg=name)


@pytest.mark.parametrize("algo", ["ppo", "a2c", "dqn", "impala", "appo"])
def test_every_learner_steps_fused_torch_adam(algo: str) -> None:
    worker = RolloutWorker("CartPole-v1", 2, 16, {"algo": algo}, seed=0)
    opt = worker.policy.optimizer
    assert type(opt) is torch.optim.Adam
    group = opt.param_groups[0]
    assert group["fused"] is True and group["eps"] == 1e-5
    batch = worker.sample()
    if algo == "dqn":
        batch["weights"] = np.ones(batch.count, np.float32)
    worker.policy.learn_on_batch(batch)
    assert {int(s["step"]) for s in opt.state.values()} == {1}


def test_sac_steps_three_fused_torch_adams() -> None:
    worker = RolloutWorker("Pendulum-v1", 2, 16, {"algo": "sac", "hiddens": [16, 16]}, seed=0)
    policy = worker.policy
    assert list(policy.optimizers) == ["critic", "actor", "alpha"]
    opts = policy.optimizers.values()
    assert all(type(o) is torch.optim.Adam and o.param_groups[0]["fused"] for o in opts)
    batch = worker.sample()
    stats = policy.learn_on_batch(batch)
    assert {"grad_gnorm", "actor_grad_gnorm", "alpha_grad_gnorm"} <= set(stats)
    assert all({int(s["step"]) for s in o.state.values()} == {1} for o in opts)


@pytest.mark.parametrize(
    ("settings", "kind", "group"),
    [
        ({"type": "adamw"}, torch.optim.AdamW, {"weight_decay": 0.01, "eps": 1e-5}),
        ({"type": "rmsprop", "alpha": 0.9}, torch.optim.RMSprop, {"alpha": 0.9}),
        ({"type": "sgd", "momentum": 0.9}, torch.optim.SGD, {"momentum": 0.9}),
        ({"type": "adam", "betas": [0.8, 0.9]}, torch.optim.Adam, {"betas": (0.8, 0.9)}),
    ],
)
def test_the_optimizer_is_chosen_by_name_with_its_settings(
    settings: dict[str, Any], kind: type, group: dict[str, Any]
) -> None:
    config = {"algo": "a2c", "lr": 0.01, "optimizer": settings}
    worker = RolloutWorker("CartPole-v1", 2, 16, config, seed=0)
    opt = worker.policy.optimizer
    assert type(opt) is kind
    assert opt.param_groups[0]["lr"] == 0.01
    for key, value in group.items():
        assert opt.param_groups[0][key] == value, key
    before = {k: v.copy() for k, v in worker.policy.get_weights().items()}
    worker.policy.learn_on_batch(worker.sample())
    after = worker.policy.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_a_setting_of_another_optimizer_is_refused_by_name() -> None:
    from pydantic import ValidationError

    from plangraph.ops.algorithms import as_policy_config

    with pytest.raises(ValidationError, match="betas is not a setting of the sgd optimizer"):
        as_policy_config({"algo": "ppo", "optimizer": {"type": "sgd", "betas": [0.9, 0.9]}})
    with pytest.raises(ValidationError, match="nesterov needs momentum > 0"):
        as_policy_config({"algo": "ppo", "optimizer": {"type": "sgd", "nesterov": True}})


def _trained_pair(tmp_path: Path) -> tuple[RolloutWorker, TorchPolicy]:
    """A PPO worker after two SGD rounds, and a fresh policy restored from its state as
    a checkpoint stores it (``write_state``/``read_state``)."""
    worker = RolloutWorker("CartPole-v1", 2, 32, {"algo": "ppo"}, seed=0)
    for _ in range(2):
        worker.policy.train(worker.sample(), 2, 16)
    write_state(tmp_path, worker.policy.get_state())
    restored = make_policy(worker.observation_space, worker.action_space, {"algo": "ppo"}, 7)
    restored.set_state(read_state(tmp_path))
    return worker, restored


def test_the_optimizer_state_round_trips_through_a_checkpoint(tmp_path: Path) -> None:
    worker, restored = _trained_pair(tmp_path)
    saved, loaded = worker.policy.optimizer.state_dict(), restored.optimizer.state_dict()
    assert saved["param_groups"] == loaded["param_groups"]
    for i, state in saved["state"].items():
        for key, value in state.items():
            assert loaded["state"][i][key].dtype == value.dtype
            assert torch.equal(loaded["state"][i][key], value), (i, key)
    batch = worker.sample()
    worker.policy.train(batch, 2, 16)
    restored.train(batch, 2, 16)
    _assert_same_weights(worker.policy, restored)


def _as_earlier_checkpoints_hold_it(state_dict: dict[str, Any]) -> dict[str, Any]:
    """The optimizer state dict as checkpoints written with ``plangraph.rl.adam`` (the
    learner's earlier Adam, torch's layout without ``torch.optim.Optimizer``) hold it:
    these group keys, every step count a float32 0-d tensor."""
    keys = (
        "lr",
        "betas",
        "eps",
        "weight_decay",
        "amsgrad",
        "maximize",
        "foreach",
        "capturable",
        "differentiable",
        "fused",
        "decoupled_weight_decay",
        "params",
    )
    group = state_dict["param_groups"][0]
    return {
        "state": {
            i: {
                "step": torch.tensor(float(s["step"]), dtype=torch.float32),
                "exp_avg": s["exp_avg"].clone(),
                "exp_avg_sq": s["exp_avg_sq"].clone(),
            }
            for i, s in state_dict["state"].items()
        },
        "param_groups": [{k: copy.deepcopy(group[k]) for k in keys}],
    }


def test_optimizer_state_of_earlier_checkpoints_loads_and_training_goes_on(
    tmp_path: Path,
) -> None:
    worker, restored = _trained_pair(tmp_path)
    state = worker.policy.get_state()
    # Earlier checkpoints hold the one optimizer's state as "optimizer".
    state["optimizer"] = _as_earlier_checkpoints_hold_it(state.pop("optimizers")["optimizer"])
    (tmp_path / "earlier").mkdir()
    write_state(tmp_path / "earlier", state)
    restored.set_state(read_state(tmp_path / "earlier"))
    batch = worker.sample()
    worker.policy.train(batch, 2, 16)
    restored.train(batch, 2, 16)
    _assert_same_weights(worker.policy, restored)
