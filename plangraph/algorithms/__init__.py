"""The built-in algorithms, one folder each, written on the public algorithm API.

Each ``plangraph/algorithms/<name>/`` holds ``config.py`` (the settings model: torch-free,
read by the compiler) and ``policy.py`` (the learner: networks, loss, acting and
postprocessing, on ``plangraph.rl``), and registers itself on import through
``plangraph.ops.algorithms.register_algorithm``, exactly as a user's algorithm does.
Importing this package (``plangraph.ops`` does) registers them all; it imports no torch.
"""

from __future__ import annotations

from plangraph.algorithms import a2c, appo, dqn, impala, pg, ppo, sac

__all__ = ["a2c", "appo", "dqn", "impala", "pg", "ppo", "sac"]
