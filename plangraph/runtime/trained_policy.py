"""The trained agent outside training: ``plangraph.load_policy(checkpoint)``, without Ray.

A checkpoint holds the learner policy's state (``state.json`` + ``arrays.npz``, data only)
and ``plan.json``, whose ``WorkerSet`` resource gives the env id and the policy config. To
rebuild the policy's model the env's spaces are needed: one env is made (and closed) to read
them, so a custom env must be registered in this process first (import the module that
registers it, or pass ``env=``, an id or a creator).

    policy = plangraph.load_policy("runs/ppo-CartPole-v1-.../")   # the newest checkpoint
    actions = policy.compute_actions(obs)          # obs float32 [B, 4] -> int64 [B]
    stats = policy.evaluate(episodes=10, seed=0)   # greedy returns, in this process
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plangraph.errors import BuildError, CheckpointError

__all__ = ["TrainedPolicy", "find_checkpoint", "load_policy"]


def find_checkpoint(path: str | os.PathLike[str], *, best: bool = False) -> Path:
    """``path`` itself when it is a checkpoint directory (it holds ``algorithm.json``), else
    the newest complete checkpoint of the run directory ``path`` (``best``: the best one by
    the run's ``--checkpoint-score``, ``plangraph.runtime.retention``).

    Raises:
        CheckpointError: ``path`` is neither, the run has no checkpoint yet, or (``best``)
            it recorded no scored checkpoint.
    """
    from plangraph.runtime.algorithm import META_FILE
    from plangraph.runtime.retention import best_checkpoint
    from plangraph.runtime.run_loop import latest_checkpoint

    path = Path(path)
    if (path / META_FILE).is_file():
        if best:
            raise CheckpointError(f"{path} is a checkpoint; best picks one of a run directory")
        return path
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such run or checkpoint directory")
    if best:
        chosen = best_checkpoint(path)
        if chosen is None:
            raise CheckpointError(
                f"{path}: no best checkpoint recorded (checkpoints/checkpoints.json names none "
                "with a score yet); evaluate the newest one without --best"
            )
        return chosen
    found = latest_checkpoint(path)
    if found is None:
        raise CheckpointError(
            f"{path}: neither a checkpoint (no {META_FILE}) nor a run directory with one "
            "(no checkpoints/iter_*/): pass a run directory of plangraph run, or one of its "
            "checkpoints/iter_NNNNNN"
        )
    return found


def _worker_set_params(ckpt: Path, resource: str | None) -> tuple[str, Any]:
    """``(resource id, WorkerSetParams)`` of the checkpoint's plan.json (either the plan
    form or the older compiled form: both hold ``resources.<id>.params`` resolved)."""
    import pydantic

    from plangraph.ops.resources import WorkerSetParams

    file = ckpt / "plan.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        resources = data["resources"]
        ids = sorted(r for r, v in resources.items() if v.get("kind") == "WorkerSet")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{file}: not a plan with resources ({exc})") from None
    if not ids:
        raise CheckpointError(f"{file}: the plan declares no WorkerSet, so no policy")
    rid = resource if resource is not None else ids[0]
    if rid not in ids:
        raise CheckpointError(f"{file}: no WorkerSet {rid!r} (worker sets: {', '.join(ids)})")
    try:
        return rid, WorkerSetParams.model_validate(resources[rid]["params"])
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = "/".join(map(str, err["loc"]))
        raise CheckpointError(f"{file}: resources/{rid}/params/{where}: {err['msg']}") from None


@dataclass
class TrainedPolicy:
    """A trained policy restored from a checkpoint, usable without Ray.

    Attributes:
        policy: the ``TorchPolicy`` (weights, config, spaces) as the learner saved it.
        env: the env creator (call it, with ``render_mode=...`` for a registered id).
        env_id: the env's name (the plan's id, or the creator's name).
        checkpoint: the checkpoint directory it was read from.
        iteration: training iterations completed when it was saved.
    """

    policy: Any
    env: Callable[..., Any]
    env_id: str
    checkpoint: Path
    iteration: int

    @property
    def meta_learning(self) -> bool:
        """Whether the policy is a meta-policy (its algorithm's capability
        ``meta_learning``: MAML), meant to be adapted to a task first: ``evaluate`` plays
        it as saved, before any inner adaptation, on the env's own task."""
        return "meta_learning" in getattr(self.policy.config, "capabilities", ())

    @property
    def observation_space(self) -> Any:
        return self.policy.observation_space

    @property
    def action_space(self) -> Any:
        return self.policy.action_space

    def compute_actions(self, obs: Any, explore: bool = False) -> np.ndarray:
        """Actions for ``obs``: float32 ``[B, *obs_shape]`` (the env's observation dtype)
        -> int64 ``[B]``; greedy unless ``explore``."""
        batch = np.asarray(obs, dtype=self.policy.observation_space.dtype)
        actions, _ = self.policy.compute_actions(batch, explore=explore)
        return actions

    def compute_action(self, obs: Any, explore: bool = False) -> int:
        """The action for one observation ``[*obs_shape]``."""
        return int(self.compute_actions(np.asarray(obs)[None], explore=explore)[0])

    def evaluate(
        self,
        episodes: int = 10,
        seed: int = 0,
        *,
        num_envs: int | None = None,
        on_frame: Callable[[np.ndarray], None] | None = None,
        render_mode: str | None = None,
    ) -> dict[str, float | int]:
        """Play ``episodes`` greedy episodes here, seeded from ``seed``'s evaluation stream
        (``plangraph.rl.evaluation``) with the policy as saved (a meta-policy,
        :attr:`meta_learning`, unadapted); returns ``episode_return_mean/std/min/max``,
        ``episode_len_mean`` and ``episodes``. ``on_frame`` gets every frame of the first
        env (``render_mode="rgb_array"``; episodes then play one after another).

        Raises:
            ValueError: ``episodes`` < 1.
        """
        from plangraph.rl.evaluation import evaluation_seeds, run_episodes
        from plangraph.runtime.evaluation import MAX_EVALUATION_ENVS

        if episodes < 1:
            raise ValueError(f"episodes={episodes}: must be >= 1")
        if num_envs is None:
            num_envs = 1 if on_frame is not None else min(episodes, MAX_EVALUATION_ENVS)
        kwargs = {} if render_mode is None else {"render_mode": render_mode}
        envs = [self.env(**kwargs) for _ in range(num_envs)]
        try:
            played = run_episodes(
                self.policy, envs, evaluation_seeds(seed, episodes), on_frame=on_frame
            )
        finally:
            for e in envs:
                e.close()
        return {**played.stats(), "episodes": int(episodes)}


def load_policy(
    checkpoint: str | os.PathLike[str],
    *,
    env: Any = None,
    resource: str | None = None,
    best: bool = False,
) -> TrainedPolicy:
    """Restore the learner policy of a checkpoint (or of a run directory's newest one).

    Args:
        checkpoint: a checkpoint directory (``runs/X/checkpoints/iter_NNNNNN``) or a run
            directory.
        best: of a run directory, take the best checkpoint by its ``--checkpoint-score``
            instead of the newest.
        env: the env, as an id or a creator; default: the plan's env id, which must be
            registered in this process (import the module that registers it first).
        resource: the WorkerSet resource id (default: the first by id).

    Raises:
        CheckpointError: not a checkpoint, corrupt or hand-edited (nothing in it is
            executed: it is read as data), or its plan has no such WorkerSet.
        BuildError: the env cannot be made here, or its spaces do not fit the policy.
    """
    from plangraph.rl.envs import env_label
    from plangraph.rl.policies import make_policy
    from plangraph.runtime.algorithm import Checkpoint
    from plangraph.runtime.build_context import resolve_worker_env

    path = find_checkpoint(checkpoint, best=best)
    ckpt = Checkpoint.load(path)
    rid, params = _worker_set_params(path, resource)
    if rid not in ckpt.state["policies"]:
        raise CheckpointError(f"{path}: state holds no policy for WorkerSet {rid!r}")
    if params.policy is None:
        raise BuildError(
            f"{path}: WorkerSet {rid!r} is multi-agent (policies "
            f"{', '.join(sorted(params.policies or {}))}); playing a trained multi-agent "
            "checkpoint is not supported yet"
        )
    creator = resolve_worker_env(rid, params.env if env is None else env)
    probe = creator()
    try:
        spaces = (probe.observation_space, probe.action_space)
    finally:
        probe.close()
    try:
        policy = make_policy(*spaces, params.policy, seed=0)
        policy.set_state(ckpt.state["policies"][rid])
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise BuildError(
            f"{path}: the checkpoint's policy does not fit env {env_label(creator)!r} "
            f"(observation {spaces[0]}, action {spaces[1]}): {exc}"
        ) from exc
    return TrainedPolicy(
        policy=policy,
        env=creator,
        env_id=env_label(creator) or str(params.env),
        checkpoint=path,
        iteration=ckpt.meta.iteration,
    )
