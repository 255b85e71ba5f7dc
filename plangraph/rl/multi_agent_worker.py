"""``MultiAgentRolloutWorker``: samples fragments of ``MultiAgentBatch`` from PettingZoo envs.

One worker = ``num_envs`` copies of a ``ParallelEnv`` (``plangraph.rl.multi_agent_env``) +
one inference policy per policy id. ``sample()`` steps every env copy
``rollout_fragment_length`` (``T``) times, so ``batch.env_steps() == T * num_envs``
exactly; each step every live agent acts once and adds one row (one agent step) to its
policy's batch.

Acting: at every step the live agents of all env copies are grouped by their policy
(``policy_mapping``) and each policy computes the actions of its group in one forward
pass. Agents that share a policy must share observation and action spaces.

Episodes are kept per agent: an agent whose termination or truncation is True leaves the
env (PettingZoo parallel API) and its episode ends there, while the others go on; the
env episode ends, and the env copy is reset (continuing its own RNG stream), when no
agent is left. Each agent episode has its own ``eps_id``; ``t`` counts the agent's own
steps and ``agent_index`` is the agent's position in ``possible_agents``.

Postprocessing, per agent trajectory piece (an agent's rows within one fragment up to its
episode end or the fragment cut), by that agent's own policy, never across two agents
(the pieces of a policy are laid end to end with ``continues`` False at each piece's last
row, so the recursions stop there):

* ``a2c``/``ppo``: ``vf_preds = V(s_t)``; ``bootstrap_values``: 0 on termination,
  ``V(final obs)`` on truncation, ``V(s_{t+1})`` otherwise (``V(current obs)`` at the
  fragment cut); then GAE(lambda) (Schulman et al. 2016; ``postprocessing.compute_gae``).
* ``dqn``/``sac``: ``next_obs`` (the final observation at the agent's episode end, the
  current observation at the cut) and, with ``n_step > 1``, n-step transitions
  (``postprocessing.compute_n_step_returns``; rewards of the same agent only).

IMPALA/APPO (V-trace over segments in order) are not supported per agent yet.

Global vars are per policy: ``set_weights(weights_by_policy, global_vars_by_policy)``, so
a DQN policy's epsilon follows ``{"timestep": <its own agent steps sampled>}`` only.

Seeding: ``derive_seeds(seed, worker_index, num_envs)``; env copy ``k`` is reset with its
sub-env seed once, then continues its RNG; policy ``j`` (sorted ids) acts with the seed
spawned from the worker's policy seed with key ``j``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plangraph.ops.algorithms import as_policy_config
from plangraph.ops.policy_mapping import map_agent
from plangraph.rl.multi_agent_batch import MultiAgentBatch
from plangraph.rl.multi_agent_env import make_multi_agent_env
from plangraph.rl.postprocessing import Fragment
from plangraph.rl.registrations import Registrations
from plangraph.rl.rollout_worker import UNSAVED_KEY, unsaved_state
from plangraph.rl.row_layout import action_row
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.seeding import derive_seeds

if TYPE_CHECKING:
    from pettingzoo import ParallelEnv

__all__ = ["MultiAgentRolloutWorker", "PolicyMapping", "policy_seeds"]

_SB = SampleBatch
_EPS_STRIDE = 1 << 40
AGENT_INDEX = "agent_index"

PolicyMapping = Mapping[str, str] | Callable[[str], str]
"""Agent id or glob pattern -> policy id (``plangraph.ops.policy_mapping``), or a function
of the agent id (Python plans only)."""
MultiAgentEnvSpec = str | Callable[..., "ParallelEnv"]
"""A registered multi-agent env name or a creator ``creator(**env_config)``."""


def policy_seeds(policy_seed: int, policy_ids: list[str]) -> dict[str, int]:
    """Policy id -> its own seed, spawned from ``policy_seed`` by the id's sorted position."""
    children = np.random.SeedSequence(int(policy_seed)).spawn(len(policy_ids))
    return {
        pid: int(c.generate_state(1, dtype=np.uint64)[0]) >> 1
        for pid, c in zip(sorted(policy_ids), children, strict=True)
    }


def resolve_mapping(mapping: PolicyMapping, agent_id: str) -> str:
    """The policy id of ``agent_id``.

    Raises:
        KeyError: no entry maps ``agent_id``.
    """
    pid = mapping(agent_id) if callable(mapping) else map_agent(agent_id, mapping)
    if pid is None:
        raise KeyError(f"policy_mapping maps no policy to agent {agent_id!r}")
    return str(pid)


class _Piece:
    """One agent's rows in the current fragment (lists of per-step values)."""

    __slots__ = ("agent_index", "cols", "end_obs", "ended")

    def __init__(self, agent_index: int, extra_keys: tuple[str, ...]) -> None:
        self.agent_index = agent_index
        keys = (_SB.OBS, _SB.ACTIONS, _SB.REWARDS, _SB.TERMINATEDS, _SB.TRUNCATEDS)
        self.cols: dict[str, list[Any]] = {k: [] for k in (*keys, _SB.EPS_ID, _SB.T, *extra_keys)}
        self.end_obs: np.ndarray | None = None  # final obs (episode end) or obs at the cut
        self.ended = False


class MultiAgentRolloutWorker:
    """Samples postprocessed ``MultiAgentBatch`` fragments; in-process or as a Ray actor.

    Args:
        env: a registered multi-agent env name or a creator (``MultiAgentEnvSpec``).
        env_config: keyword arguments of the env creator.
        num_envs: env copies ``N`` (>= 1).
        rollout_fragment_length: env steps ``T`` per env copy in one ``sample()`` (>= 1).
        policies: policy id -> ``PolicyConfig`` (or dict); ``impala``/``appo`` refused.
        policy_mapping: agent id or glob -> policy id, or a function (``PolicyMapping``).
        seed: the run seed; worker seeds derive from ``(seed, worker_index)``.
        worker_index: 0 for the local worker, ``1..num_workers`` for remote ones.
        policy_objects: policy id -> an already built policy to act with (the learner's
            own when sampling in-process); others are built here.
        torch_threads: if set, ``torch.set_num_threads(torch_threads)`` (1 in Ray actors).
        registrations: the driver's user algorithms and model types
            (``plangraph.rl.registrations``), installed here first.

    Raises:
        ValueError: ``num_envs`` or ``rollout_fragment_length`` < 1, an unsupported algo,
            or agents of one policy with different spaces.
        KeyError: an agent that ``policy_mapping`` does not map, or maps to an undeclared
            policy.
    """

    @property
    def index(self) -> int:
        """``worker_index``: 0 for the local worker, ``1..num_workers`` for remote ones
        (what a per-shard operator's ``fn(worker, item)`` reads as ``worker.index``)."""
        return self.worker_index

    def __init__(
        self,
        env: MultiAgentEnvSpec,
        env_config: Mapping[str, Any] | None,
        num_envs: int,
        rollout_fragment_length: int,
        policies: Mapping[str, Any],
        policy_mapping: PolicyMapping,
        seed: int = 0,
        worker_index: int = 0,
        *,
        policy_objects: Mapping[str, Any] | None = None,
        torch_threads: int | None = None,
        registrations: Registrations | None = None,
    ) -> None:
        if registrations is not None:  # before the configs: user algorithms' among them
            registrations.install()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if rollout_fragment_length < 1:
            raise ValueError(f"rollout_fragment_length must be >= 1, got {rollout_fragment_length}")
        self.configs = {pid: as_policy_config(c) for pid, c in sorted(policies.items())}
        self.num_envs = int(num_envs)
        self.rollout_fragment_length = int(rollout_fragment_length)
        self.worker_index = int(worker_index)
        # What per-shard operators (placement="shard") keep between items on this worker,
        # by node id: they run inside it (plangraph.runtime.shards).
        self.shard_state: dict[str, Any] = {}
        self.policy_seed, self.sub_env_seeds = derive_seeds(seed, worker_index, num_envs)
        self.envs = [make_multi_agent_env(env, env_config) for _ in range(self.num_envs)]
        first = self.envs[0]
        self.possible_agents: list[str] = list(first.possible_agents)
        self.agent_policy: dict[str, str] = {}
        for agent in self.possible_agents:
            pid = resolve_mapping(policy_mapping, agent)
            if pid not in self.configs:
                raise KeyError(
                    f"policy_mapping maps agent {agent!r} to {pid!r}, which is not a declared "
                    f"policy ({', '.join(self.configs)})"
                )
            self.agent_policy[agent] = pid
        self.spaces: dict[str, tuple[Any, Any]] = {}
        for agent, pid in self.agent_policy.items():
            spaces = (first.observation_space(agent), first.action_space(agent))
            seen = self.spaces.setdefault(pid, spaces)
            if seen != spaces:
                raise ValueError(
                    f"agents of policy {pid!r} have different spaces: {agent!r} has {spaces}, "
                    f"an earlier agent {seen}; map them to different policies"
                )
        if torch_threads is not None:
            import torch

            torch.set_num_threads(torch_threads)
        seeds = policy_seeds(self.policy_seed, list(self.configs))
        self.policies: dict[str, Any] = {}
        for pid in self.spaces:  # policies no agent uses are not built
            cfg, (obs_space, act_space) = self.configs[pid], self.spaces[pid]
            if policy_objects and pid in policy_objects:
                self.policies[pid] = policy_objects[pid]
            else:
                from plangraph.rl.policies import make_policy

                self.policies[pid] = make_policy(obs_space, act_space, cfg, seeds[pid])
            if getattr(self.policies[pid], "is_recurrent", False):
                raise ValueError(
                    f"policy {pid!r} has a recurrent model: multi-agent worker sets do not "
                    "carry recurrent state yet (docs/recurrent.md); give it a model without "
                    "state"
                )
        self._eps_counter = 0
        self._obs: list[dict[str, np.ndarray]] = []
        self._ep_return: list[dict[str, float]] = []
        self._ep_len: list[dict[str, int]] = []
        self._eps_ids: list[dict[str, int]] = []
        self._env_return = np.zeros(self.num_envs, dtype=np.float64)
        self._env_len = np.zeros(self.num_envs, dtype=np.int64)
        for k, sub in enumerate(self.envs):
            obs, _ = sub.reset(seed=int(self.sub_env_seeds[k] % (2**31)))
            self._obs.append(obs)
            self._start_episode(k, list(sub.agents))
        self.num_env_steps_sampled = 0
        self.num_agent_steps_sampled: dict[str, int] = {pid: 0 for pid in self.configs}

    def _start_episode(self, k: int, agents: list[str]) -> None:
        while len(self._ep_return) <= k:
            self._ep_return.append({})
            self._ep_len.append({})
            self._eps_ids.append({})
        self._ep_return[k] = dict.fromkeys(agents, 0.0)
        self._ep_len[k] = dict.fromkeys(agents, 0)
        self._eps_ids[k] = {}
        for a in agents:
            self._eps_ids[k][a] = self.worker_index * _EPS_STRIDE + self._eps_counter
            self._eps_counter += 1
        self._env_return[k] = 0.0
        self._env_len[k] = 0

    # --- sampling ---------------------------------------------------------------------
    def sample(self) -> MultiAgentBatch:
        """Step every env copy ``T`` times; one postprocessed ``MultiAgentBatch``.

        ``policy_batches[pid]`` columns: ``obs, actions, rewards, terminateds, truncateds,
        eps_id, t, agent_index, next_obs`` plus ``action_logp, action_dist_inputs,
        vf_preds, bootstrap_values, advantages, value_targets`` (a2c/ppo) or, with
        ``n_step > 1``, ``n_steps`` (dqn/sac). Rows: one agent's piece after another.
        """
        import torch

        # One inference-mode section for the whole fragment (``RolloutWorker.sample``).
        with torch.inference_mode():
            return self._sample_fragment()

    def _sample_fragment(self) -> MultiAgentBatch:
        pieces: dict[tuple[int, str], _Piece] = {}
        done_pieces: list[tuple[str, _Piece]] = []
        agent_eps: dict[str, tuple[list[float], list[int]]] = {
            pid: ([], []) for pid in self.policies
        }
        env_returns: list[float] = []
        env_lengths: list[int] = []
        agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        for _ in range(self.rollout_fragment_length):
            groups: dict[str, list[tuple[int, str]]] = {}
            for k, sub in enumerate(self.envs):
                for a in sub.agents:
                    groups.setdefault(self.agent_policy[a], []).append((k, a))
            actions: list[dict[str, Any]] = [{} for _ in self.envs]
            for pid, members in groups.items():
                obs = np.stack([self._obs[k][a] for k, a in members])
                acts, extra = self.policies[pid].compute_actions(obs)
                for j, (k, a) in enumerate(members):
                    piece = pieces.get((k, a))
                    if piece is None:
                        piece = pieces[(k, a)] = _Piece(agent_index[a], tuple(extra))
                    c = piece.cols
                    c[_SB.OBS].append(obs[j])
                    c[_SB.ACTIONS].append(acts[j])
                    c[_SB.EPS_ID].append(self._eps_ids[k][a])
                    c[_SB.T].append(self._ep_len[k][a])
                    for key, value in extra.items():
                        c[key].append(value[j])
                    actions[k][a] = acts[j]
            for k, sub in enumerate(self.envs):
                obs, rew, term, trunc, _ = sub.step(actions[k])
                self._env_len[k] += 1
                for a in actions[k]:
                    piece = pieces[(k, a)]
                    r = float(rew[a])
                    piece.cols[_SB.REWARDS].append(r)
                    piece.cols[_SB.TERMINATEDS].append(bool(term[a]))
                    piece.cols[_SB.TRUNCATEDS].append(bool(trunc[a]))
                    self._ep_return[k][a] += r
                    self._ep_len[k][a] += 1
                    self._env_return[k] += r
                    if term[a] or trunc[a]:
                        piece.ended, piece.end_obs = True, np.asarray(obs[a])
                        pid = self.agent_policy[a]
                        agent_eps[pid][0].append(self._ep_return[k][a])
                        agent_eps[pid][1].append(self._ep_len[k][a])
                        done_pieces.append((pid, pieces.pop((k, a))))
                    else:
                        self._obs[k][a] = obs[a]
                if not sub.agents:
                    env_returns.append(float(self._env_return[k]))
                    env_lengths.append(int(self._env_len[k]))
                    self._obs[k], _ = sub.reset()
                    self._start_episode(k, list(sub.agents))
        for (k, a), piece in pieces.items():  # cut by the fragment: bootstrap from obs now
            piece.end_obs = np.asarray(self._obs[k][a])
            done_pieces.append((self.agent_policy[a], piece))
        env_steps = self.rollout_fragment_length * self.num_envs
        self.num_env_steps_sampled += env_steps
        batches: dict[str, SampleBatch] = {}
        for pid in self.policies:
            mine = sorted(
                (p for q, p in done_pieces if q == pid),
                key=lambda p: (p.agent_index, p.cols[_SB.EPS_ID][0], p.cols[_SB.T][0]),
            )
            returns, lengths = agent_eps[pid]
            batches[pid] = self._postprocess(pid, mine, returns, lengths)
            self.num_agent_steps_sampled[pid] += batches[pid].count
        return MultiAgentBatch(
            batches, env_steps, episode_returns=env_returns, episode_lengths=env_lengths
        )

    def _postprocess(
        self, pid: str, pieces: list[_Piece], returns: list[float], lengths: list[int]
    ) -> SampleBatch:
        """One policy's pieces laid end to end and postprocessed by that policy."""
        obs_space, act_space = self.spaces[pid]
        if not pieces:
            return SampleBatch(episode_returns=returns, episode_lengths=lengths)
        policy = self.policies[pid]
        act_shape, act_dtype = action_row(act_space)
        cols: dict[str, np.ndarray] = {}
        for key in pieces[0].cols:
            cols[key] = np.concatenate([np.asarray(p.cols[key]) for p in pieces])
        cols[_SB.OBS] = cols[_SB.OBS].astype(obs_space.dtype, copy=False)
        cols[_SB.ACTIONS] = cols[_SB.ACTIONS].astype(act_dtype, copy=False).reshape(-1, *act_shape)
        cols[_SB.REWARDS] = cols[_SB.REWARDS].astype(np.float32)
        cols[_SB.EPS_ID] = cols[_SB.EPS_ID].astype(np.int64)
        cols[_SB.T] = cols[_SB.T].astype(np.int64)
        sizes = [len(p.cols[_SB.REWARDS]) for p in pieces]
        cols[AGENT_INDEX] = np.repeat([p.agent_index for p in pieces], sizes).astype(np.int64)
        # One sequence of the pieces laid end to end: each piece ends its episode or is cut
        # by the fragment, so the observation after its last row is its end_obs.
        continues = np.ones(len(cols[_SB.REWARDS]), dtype=bool)
        successors: dict[tuple[int, int], np.ndarray] = {}
        end = 0
        for p, n in zip(pieces, sizes, strict=True):
            end += n
            continues[end - 1] = False
            successors[(0, end - 1)] = np.asarray(p.end_obs, dtype=obs_space.dtype)
        last_obs = successors.pop((0, end - 1))[None]
        columns = {k: v[None] for k, v in cols.items()}
        fragment = Fragment(columns, continues[None], last_obs, successors)
        for key, value in policy.postprocess_fragment(fragment).items():
            cols[key] = value[0]
        return SampleBatch(cols, episode_returns=returns, episode_lengths=lengths)

    # --- weights ----------------------------------------------------------------------
    def get_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """Policy id -> its inference weights."""
        return {pid: p.get_weights() for pid, p in self.policies.items()}

    def set_weights(
        self,
        weights: Mapping[str, Mapping[str, np.ndarray]],
        global_vars: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Load each listed policy's weights and, if given, its own global vars
        (``{pid: {"timestep": <pid's agent steps sampled>}}``); unlisted policies keep
        theirs."""
        for pid, w in weights.items():
            if pid in self.policies:
                self.policies[pid].set_weights(w)
        if global_vars:
            self.set_global_vars(global_vars)

    def set_global_vars(self, global_vars: Mapping[str, Mapping[str, Any]]) -> None:
        """Policy id -> that policy's global vars (``{"timestep": ...}``)."""
        for pid, gv in global_vars.items():
            if pid in self.policies:
                self.policies[pid].set_global_vars(gv)

    # --- checkpoints ------------------------------------------------------------------
    def get_state(self, include_policy: bool = True) -> dict[str, Any]:
        """This worker's state between two ``sample()`` calls, as plain data: per env copy
        the live agents, current observations, partial per-agent episodes (return, length,
        id) and env episode, and its env's state (``{"snapshot": [per agent sub-env
        capture_env]}`` for an env exposing ``sub_envs`` such as ``MultiAgentCartPole``,
        else ``{"snapshot": None, "reason": ...}``: reset on restore); the counters; and,
        with ``include_policy``, each policy copy's sampling state (weights, timestep, RNG).
        """
        from plangraph.rl.env_state import capture_env

        envs = []
        for sub in self.envs:
            subs = getattr(sub, "sub_envs", None)
            entry: dict[str, Any] = {"snapshot": None, "reason": "no sub_envs to capture"}
            if subs is not None:
                snaps = {a: capture_env(e) for a, e in subs.items()}
                bad = [f"{a}: {why}" for a, (snap, why) in snaps.items() if snap is None]
                entry = (
                    {"snapshot": {a: snap for a, (snap, _) in snaps.items()}}
                    if not bad
                    else {"snapshot": None, "reason": "; ".join(bad)}
                )
            envs.append(entry)
        state: dict[str, Any] = {
            "worker_index": self.worker_index,
            "num_envs": self.num_envs,
            "envs": envs,
            "agents": [list(sub.agents) for sub in self.envs],
            "obs": [{a: np.array(o, copy=True) for a, o in obs.items()} for obs in self._obs],
            "ep_return": [dict(d) for d in self._ep_return],
            "ep_len": [dict(d) for d in self._ep_len],
            "eps_ids": [dict(d) for d in self._eps_ids],
            "env_return": self._env_return.copy(),
            "env_len": self._env_len.copy(),
            "eps_counter": self._eps_counter,
            "num_env_steps_sampled": self.num_env_steps_sampled,
            "num_agent_steps_sampled": dict(self.num_agent_steps_sampled),
        }
        if include_policy:
            state["policies"] = {pid: p.get_sampling_state() for pid, p in self.policies.items()}
        copies = list(self.policies.values()) if include_policy else []
        unsaved = unsaved_state(self.shard_state, copies)
        if unsaved:
            state[UNSAVED_KEY] = unsaved
        return state

    def set_state(self, state: Mapping[str, Any]) -> list[int]:
        """Continue from ``get_state()`` of a worker with the same env, ``num_envs`` and
        ``worker_index``; returns the env copies reset instead of restored (their partial
        episodes dropped, a reset seed derived from the env steps sampled).

        Raises:
            ValueError: the state is of another ``num_envs`` or ``worker_index``.
        """
        from plangraph.rl.env_state import restore_env

        if int(state["num_envs"]) != self.num_envs:
            raise ValueError(
                f"worker state has {state['num_envs']} env copies, this worker has {self.num_envs}"
            )
        if int(state["worker_index"]) != self.worker_index:
            raise ValueError(
                f"worker state is of worker {state['worker_index']}, this is worker "
                f"{self.worker_index}"
            )
        self._eps_counter = int(state["eps_counter"])
        self.num_env_steps_sampled = int(state["num_env_steps_sampled"])
        self.num_agent_steps_sampled = {
            pid: int(n) for pid, n in state["num_agent_steps_sampled"].items()
        }
        reset = []
        for k, (sub, entry) in enumerate(zip(self.envs, state["envs"], strict=True)):
            if entry["snapshot"] is not None:
                for a, snap in entry["snapshot"].items():
                    restore_env(sub.sub_envs[a], snap)
                sub.agents = list(state["agents"][k])
                self._obs[k] = {a: np.array(o) for a, o in state["obs"][k].items()}
                self._ep_return[k] = dict(state["ep_return"][k])
                self._ep_len[k] = {a: int(n) for a, n in state["ep_len"][k].items()}
                self._eps_ids[k] = {a: int(n) for a, n in state["eps_ids"][k].items()}
                self._env_return[k] = float(state["env_return"][k])
                self._env_len[k] = int(state["env_len"][k])
                continue
            seq = np.random.SeedSequence(
                self.sub_env_seeds[k], spawn_key=(self.num_env_steps_sampled,)
            )
            self._obs[k], _ = sub.reset(seed=int(seq.generate_state(1)[0] % (2**31)))
            self._start_episode(k, list(sub.agents))
            reset.append(k)
        for pid, ps in state.get("policies", {}).items():
            if pid in self.policies:
                self.policies[pid].set_sampling_state(ps)
        return reset

    def get_spaces(self) -> dict[str, tuple[Any, Any]]:
        """Policy id -> ``(observation space, action space)`` of its agents."""
        return dict(self.spaces)

    def ping(self) -> bool:
        """Liveness probe."""
        return True

    def stop(self) -> None:
        """Close the env copies."""
        for sub in self.envs:
            sub.close()
