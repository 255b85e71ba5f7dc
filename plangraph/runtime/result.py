"""The declared schema of a training result: what one iteration of a plan reports.

``Result`` is the one definition of the result dict that ``StandardMetricsReporting``
emits (``RunState.end_iteration``) and that ``Algorithm.train``/``run`` return. The stop
criteria (``--stop`` key checks), the progress bar and summary table, the result log and
the README's table of result keys all read their key names from here; ``RESULT_KEYS`` and
``NESTED_RESULT_KEYS`` are derived from the ``TypedDict``, never written out twice.

Import-light (no ray, no torch): ``plangraph run`` checks ``--stop`` keys before Ray starts.
"""

from __future__ import annotations

import typing
from typing import TypedDict

__all__ = [
    "EPISODE_STAT_KEYS",
    "EVALUATION_KEY",
    "MULTI_AGENT_KEYS",
    "NESTED_RESULT_KEYS",
    "POLICY_RESULT_KEYS",
    "RESULT_KEYS",
    "RESULT_TYPES",
    "Result",
]


class _AlwaysPresent(TypedDict):
    """The keys every result holds (see ``Result``)."""

    iteration: int
    """Training iterations completed, this one included (1 for the first result)."""
    time_this_iter_s: float
    """Wall-clock seconds this iteration took inside the dataflow (s)."""
    time_total_s: float
    """Wall-clock seconds of all iterations of the run so far (s; excludes the driver's
    logging and checkpointing between iterations)."""
    timestamp: float
    """Unix time when the result was made (s since the epoch)."""
    num_env_steps_sampled: int
    """Env steps sampled by the rollout workers, every sub-env step once (env steps)."""
    num_env_steps_trained: int
    """Rows trained on, once per train batch however many SGD epochs (env steps)."""
    num_target_updates: int
    """Target-network syncs made by ``UpdateTarget`` (count)."""
    num_worker_restarts: int
    """Dead rollout workers replaced in the run so far (count; bounded by the WorkerSet's
    ``max_worker_restarts``)."""
    num_env_steps_sampled_this_iter: int
    """Env steps sampled during this iteration (env steps)."""
    env_steps_per_s: float
    """Sampling throughput of this iteration (env steps / s; 0.0 for a zero-length one)."""
    env_steps_per_s_total: float
    """``num_env_steps_sampled / time_total_s`` (env steps / s)."""
    episodes_this_iter: int
    """Training episodes completed during this iteration (count)."""
    episodes_total: int
    """Training episodes completed in the run so far (count)."""
    counters: dict[str, int]
    """Every counter of the dataflow by name, the three above included, plus operator
    bookkeeping such as ``num_updates/<node id>`` (counts / env steps)."""
    timers: dict[str, float]
    """Wall time per item of every plan node that has emitted one, by node id: the node's
    own (exclusive) seconds per item it emitted, mean of its last 10 items (s). The run's
    cumulative profile is ``profile.json`` (``plangraph profile``)."""
    learner: dict[str, float]
    """Scalar stats of the last learner update (loss, entropy, KL, ...; as the policy
    reports them); empty before the first update."""


# total=False (not typing.NotRequired) keeps the schema importable on Python 3.10.
class _EpisodeStats(_AlwaysPresent, total=False):
    """The training-episode statistics, absent (never NaN) until an episode ends."""

    episode_return_mean: float
    """Mean undiscounted return of the last ``metrics_window`` completed training episodes
    (with exploration)."""
    episode_return_min: float
    """Lowest return in that window."""
    episode_return_max: float
    """Highest return in that window."""
    episode_len_mean: float
    """Mean length of the episodes in that window (env steps)."""


class _MultiAgent(_EpisodeStats, total=False):
    """Keys of multi-agent plans only (a worker set with ``policies``)."""

    num_agent_steps_sampled: int
    """Agent steps sampled: one per agent per env step it acted in (agent steps)."""
    num_agent_steps_trained: int
    """Rows of all policies trained on, once per train batch (agent steps)."""
    policies: dict[str, dict[str, typing.Any]]
    """Per policy id: ``episode_return_mean``, ``episode_return_min``,
    ``episode_return_max``, ``episode_len_mean`` (its agents' episodes, agent steps; absent
    until one ends), ``episodes_total``, ``num_agent_steps_sampled``,
    ``num_agent_steps_trained`` and ``learner`` (its last learner stats); addressed as
    ``policies/<id>/episode_return_mean``."""


class Result(_MultiAgent, total=False):
    """One training iteration's result (``Algorithm.train()``; a line of ``result.jsonl``).

    Counts are cumulative over the run (a restored run continues them) unless the key says
    ``_this_iter``. The episode statistics may be absent (never NaN) until the first
    training episode ends, ``evaluation`` is there only on the iterations that evaluated;
    every key of ``_AlwaysPresent`` is always there.
    """

    evaluation: dict[str, float]
    """Greedy evaluation episodes played after this iteration, every
    ``evaluation_interval`` iterations: ``episode_return_mean``, ``episode_return_std``,
    ``episode_return_min``, ``episode_return_max``, ``episode_len_mean`` (env steps) and
    ``time_s`` (s, not in ``time_total_s``)."""


RESULT_TYPES: dict[str, typing.Any] = typing.get_type_hints(Result)
"""Each result key's declared type: ``{"iteration": int, ...}``."""

RESULT_KEYS: frozenset[str] = frozenset(RESULT_TYPES)
"""Every top-level key a result may hold."""

EPISODE_STAT_KEYS: frozenset[str] = frozenset(_EpisodeStats.__optional_keys__)
"""The keys absent until the first training episode ends."""

MULTI_AGENT_KEYS: frozenset[str] = frozenset(
    _MultiAgent.__optional_keys__ - _EpisodeStats.__optional_keys__
)
"""The keys only multi-agent plans report."""

POLICY_RESULT_KEYS: frozenset[str] = frozenset(
    {"episode_return_mean", "episode_return_min", "episode_return_max", "episode_len_mean"}
    | {"episodes_total", "num_agent_steps_sampled", "num_agent_steps_trained", "learner"}
)
"""The keys of each policy's entry in ``policies`` (``policies/<id>/<key>``; ``learner``
is a dict, ``policies/<id>/learner/<stat>``)."""

EVALUATION_KEY = "evaluation"
"""The key present only on iterations that ran evaluation episodes."""

NESTED_RESULT_KEYS: tuple[str, ...] = tuple(
    key for key, hint in RESULT_TYPES.items() if typing.get_origin(hint) is dict
)
"""Keys whose value is a dict, addressed as ``key/inner`` (``timers/train``)."""
