"""Sampling throughput: one RolloutWorker vs a bare gymnasium vector-env + policy loop.

Both run in this process with ``torch.set_num_threads(1)`` on the same env (CartPole-v1),
the same number of sub-envs and the same 64x64 tanh MLP policy:

* ``bare loop``: ``gym.make_vec(..., vectorization_mode="sync")`` (default autoreset), one
  ``torch.inference_mode()`` forward per vector step, ``Categorical(logits).sample()``,
  ``env.step``; nothing is stored or postprocessed.
* ``RolloutWorker.sample``: the real thing: fragment buffers, behaviour log-probs and
  logits, value predictions, bootstrap values, GAE, episode stats, the flat SampleBatch.

Usage: ``.venv/bin/python tools/bench_sampling.py [--envs 8] [--fragment 256] [--steps 100000]``
Prints env steps/s (best of ``--repeats``) and the ratios worker / bare. A third row runs
the bare loop with the worker's numpy action sampling, to separate sampling cost from
bookkeeping cost.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from plangraph.algorithms.ppo import PPOConfig
from plangraph.rl.rollout_worker import RolloutWorker


def bare_loop(
    env_id: str, num_envs: int, steps_per_env: int, seed: int, numpy_sampling: bool = False
) -> float:
    """Env steps per second of a minimal vector-env + MLP-policy loop.

    ``numpy_sampling`` draws actions by inverse CDF with numpy (as the worker does) instead
    of ``torch.distributions.Categorical``, isolating the cost of the worker's bookkeeping.
    """
    env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    obs_dim = int(np.prod(env.single_observation_space.shape))
    net = nn.Sequential(
        nn.Linear(obs_dim, 64),
        nn.Tanh(),
        nn.Linear(64, 64),
        nn.Tanh(),
        nn.Linear(64, int(env.single_action_space.n)),
    )
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(steps_per_env):
        with torch.inference_mode():
            logits = net(torch.from_numpy(obs))
            if numpy_sampling:
                cdf = np.cumsum(torch.softmax(logits, dim=-1).numpy(), axis=1)
                actions = (rng.random((num_envs, 1)) * cdf[:, -1:] >= cdf).sum(axis=1)
                actions = np.minimum(actions, cdf.shape[1] - 1)
            else:
                actions = torch.distributions.Categorical(logits=logits).sample().numpy()
        obs, _, _, _, _ = env.step(actions)
    elapsed = time.perf_counter() - start
    env.close()
    return steps_per_env * num_envs / elapsed


def worker_loop(env_id: str, num_envs: int, fragment: int, steps_per_env: int, seed: int) -> float:
    """Env steps per second of ``RolloutWorker.sample()`` (PPO postprocessing)."""
    worker = RolloutWorker(env_id, num_envs, fragment, PPOConfig(hiddens=(64, 64)), seed=seed)
    worker.sample()  # warm-up
    calls = max(1, steps_per_env // fragment)
    start = time.perf_counter()
    steps = 0
    for _ in range(calls):
        steps += worker.sample().env_steps()
    elapsed = time.perf_counter() - start
    worker.stop()
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--envs", type=int, default=8, help="sub-envs per vector env")
    parser.add_argument("--fragment", type=int, default=256, help="rollout_fragment_length")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    per_env = max(1, args.steps // args.envs)
    bare, bare_np, work = [], [], []
    for r in range(args.repeats):
        bare.append(bare_loop(args.env, args.envs, per_env, args.seed + r))
        bare_np.append(bare_loop(args.env, args.envs, per_env, args.seed + r, numpy_sampling=True))
        work.append(worker_loop(args.env, args.envs, args.fragment, per_env, args.seed + r))
    b, bn, w = max(bare), max(bare_np), max(work)
    print(
        f"{args.env}, {args.envs} sub-envs, 64x64 tanh MLP, fragment {args.fragment}, "
        f"{per_env * args.envs} env steps per run, best of {args.repeats}, 1 torch thread"
    )
    print(f"{'loop':<40}{'env steps/s':>14}")
    print(f"{'bare vector env + MLP (Categorical)':<40}{b:>14,.0f}")
    print(f"{'bare vector env + MLP (numpy sampling)':<40}{bn:>14,.0f}")
    print(f"{'RolloutWorker.sample (PPO, postprocessed)':<40}{w:>14,.0f}")
    print(f"{'ratio worker / bare (Categorical)':<40}{w / b:>14.2f}")
    print(f"{'ratio worker / bare (numpy sampling)':<40}{w / bn:>14.2f}")


if __name__ == "__main__":
    main()
