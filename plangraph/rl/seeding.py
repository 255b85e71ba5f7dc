"""Seed derivation: one run seed -> independent seeds for every worker and sub-env.

Uses numpy's ``SeedSequence`` spawn tree, so the streams are statistically independent
and reproducible from the run seed alone:

* worker ``i`` (0 = the local learner / local worker, 1..N = remote rollout workers) uses
  ``SeedSequence(run_seed, spawn_key=(i,))``;
* inside a worker, child 0 seeds the policy (torch init, action sampling) and child
  ``1 + k`` seeds sub-env ``k`` (``env.reset(seed=...)`` on the first reset only, so each
  sub-env then continues its own stream across autoresets).

A recreated worker with the same index gets the same seeds.
"""

from __future__ import annotations

import numpy as np


def worker_seed_sequence(run_seed: int, worker_index: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of worker ``worker_index`` in a run seeded with ``run_seed``."""
    if worker_index < 0:
        raise ValueError(f"worker_index must be >= 0, got {worker_index}")
    return np.random.SeedSequence(int(run_seed), spawn_key=(int(worker_index),))


def _to_int(seq: np.random.SeedSequence) -> int:
    # 63 bits: fits torch.manual_seed and gymnasium's seeding (non-negative Python int).
    return int(seq.generate_state(1, dtype=np.uint64)[0]) >> 1


def derive_seeds(run_seed: int, worker_index: int, num_envs: int) -> tuple[int, list[int]]:
    """``(policy_seed, [sub_env_seed_0, ..., sub_env_seed_{num_envs-1}])`` for one worker.

    All seeds are non-negative Python ints below ``2**63``.
    """
    children = worker_seed_sequence(run_seed, worker_index).spawn(1 + num_envs)
    return _to_int(children[0]), [_to_int(c) for c in children[1:]]
