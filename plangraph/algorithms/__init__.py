"""The built-in algorithms, one folder each, written on the public algorithm API.

Each ``plangraph/algorithms/<name>/`` holds ``config.py`` (the settings model: torch-free,
read by the compiler) and ``policy.py`` (the learner: networks, loss, acting and
postprocessing, on ``plangraph.rl``), and registers itself on import through
``register_algorithm``, exactly as a user's algorithm does. Importing this package
(``plangraph.ops`` loads it by name: ``plangraph.ops.algorithms.load_builtin_algorithms``)
registers them all; it imports no torch.
"""

from __future__ import annotations

from plangraph.algorithms import (
    a2c,
    appo,
    bc,
    cql,
    ddpg,
    ddppo,
    dqn,
    impala,
    maml,
    marwil,
    pg,
    ppo,
    r2d2,
    sac,
    td3,
)

__all__ = [
    "a2c",
    "appo",
    "bc",
    "cql",
    "ddpg",
    "ddppo",
    "dqn",
    "impala",
    "maml",
    "marwil",
    "pg",
    "ppo",
    "r2d2",
    "sac",
    "td3",
]
