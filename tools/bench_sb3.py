#!/usr/bin/env python3
"""Reference point: Stable-Baselines3 PPO on CartPole-v1 to the same "solved" criterion.

Runs SB3's PPO with the rl-baselines3-zoo CartPole-v1 hyperparameters (8 envs,
n_steps 32, batch 256, 20 epochs, lr 1e-3 linear, gae 0.8, gamma 0.98) until the mean
return of the last 100 *training* episodes reaches ``--target`` (the same criterion as
``tools/train_all.py``), and prints env steps and wall seconds to solve.

Stable-Baselines3 is not a plangraph dependency: run this from an environment that has it,
e.g. ``python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install torch==2.13.0
stable-baselines3 && /tmp/sb3/bin/python tools/bench_sb3.py``.
"""

from __future__ import annotations

import argparse
import time
from collections import deque


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--budget", type=int, default=300_000, help="env steps")
    args = ap.parse_args()

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)

    class SolvedAt(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=100)
            self.solved_at: int | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
            if len(self.returns) == 100 and sum(self.returns) / 100 >= args.target:
                self.solved_at = self.num_timesteps
                return False
            return True

    print("| library | seed | solved | env steps | wall s |")
    print("|---|---|---|---|---|")
    for seed in args.seeds:
        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
        start = time.perf_counter()
        model = PPO(
            "MlpPolicy",
            env,
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=lambda f: 1e-3 * f,
            clip_range=lambda f: 0.2 * f,
            seed=seed,
            device="cpu",
            verbose=0,
        )
        cb = SolvedAt()
        model.learn(total_timesteps=args.budget, callback=cb)
        wall = time.perf_counter() - start
        steps = cb.solved_at if cb.solved_at is not None else model.num_timesteps
        solved = "yes" if cb.solved_at is not None else "no"
        print(f"| SB3 PPO | {seed} | {solved} | {steps:,} | {wall:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
