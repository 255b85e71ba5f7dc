#!/usr/bin/env python3
"""The start-up floor: what ``plangraph run plans/ppo.json --max-iterations 1`` must do, as
a plain script on Ray's, torch's and gymnasium's public APIs, ordered as well as they allow.

Ray first; the two actors are created at once (``.remote()`` returns immediately) and
import torch and make 8 CartPole-v1 sub-envs each while this process imports torch and
builds its network; then one 64-step fragment per actor, one Adam step on the 1,024 rows,
the weights broadcast (``ray.put`` once, every actor waited for) and Ray shut down. Once
the long-lived objects exist (modules, network, optimizer), ``gc.freeze()`` keeps the
cyclic GC from traversing them again, at exit too, as ``plangraph run`` does.
``tools/bench_startup.py`` times it next to plangraph.
"""

import gc

import gymnasium as gym
import numpy as np
import ray

ray.init(address="local", include_dashboard=False, configure_logging=False)


def mlp(torch, obs_dim: int, act_dim: int):
    nn = torch.nn
    return nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, act_dim))


@ray.remote
class Worker:
    def __init__(self, seed: int) -> None:
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 8)
        self.obs, _ = self.envs.reset(seed=seed)
        self.net = mlp(torch, 4, 2)

    def sample(self, steps: int) -> dict[str, np.ndarray]:
        torch, rows = self.torch, {"obs": [], "actions": [], "rewards": []}
        with torch.inference_mode():
            for _ in range(steps):
                logits = self.net(torch.from_numpy(self.obs))
                actions = torch.distributions.Categorical(logits=logits).sample().numpy()
                rows["obs"].append(self.obs)
                rows["actions"].append(actions)
                self.obs, rewards, _, _, _ = self.envs.step(actions)
                rows["rewards"].append(rewards)
        return {k: np.concatenate(v) for k, v in rows.items()}

    def set_weights(self, weights: dict) -> None:
        self.net.load_state_dict(weights)


workers = [Worker.remote(seed) for seed in range(2)]
import torch  # noqa: E402  (after the actors were created: they start meanwhile)

torch.set_num_threads(1)
net = mlp(torch, 4, 2)
optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
gc.freeze()  # what lives until exit, out of the cyclic GC's full collections (as plangraph)
batches = ray.get([w.sample.remote(64) for w in workers])
obs = torch.from_numpy(np.concatenate([b["obs"] for b in batches]))
actions = torch.from_numpy(np.concatenate([b["actions"] for b in batches]))
returns = torch.from_numpy(np.concatenate([b["rewards"] for b in batches]))
log_probs = torch.distributions.Categorical(logits=net(obs)).log_prob(actions)
loss = -(log_probs * returns).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()
weights = ray.put({k: v.detach().clone() for k, v in net.state_dict().items()})
ray.get([w.set_weights.remote(weights) for w in workers])
ray.shutdown()
print(f"rows trained: {len(obs)}")
