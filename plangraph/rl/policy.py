"""Torch policy base: gradients, optimizer steps, SGD epochs, weights, schedules, state.

A policy owns one torch model and one Adam optimizer (``torch.optim.Adam``, fused; built
by ``build_optimizers``, which a worker set calls for its learner while the rollout
workers start, or when the policy first trains; a rollout worker's copy never builds
one). The update paths share one code path, so they agree bit for bit:

* ``compute_gradients(batch)`` -> raw gradients of the loss on the whole batch;
* ``apply_gradients(grads)`` -> clip the global L2 norm to ``grad_clip``, one Adam step;
* ``learn_on_batch(batch)`` == ``apply_gradients(compute_gradients(batch))``;
* ``train(batch, num_sgd_iter, sgd_minibatch_size)``: ``learn_on_batch`` once when
  ``num_sgd_iter == 1 and sgd_minibatch_size == 0``; otherwise ``num_sgd_iter`` epochs,
  each over freshly shuffled minibatches of ``sgd_minibatch_size`` rows (the last one holds
  the remainder; ``0`` = the whole batch), one optimizer step per minibatch. Stats are
  averaged over the minibatches of the *last* epoch (as RLlib's ``do_minibatch_sgd``).

Clipping happens when gradients are applied, so averaged microbatch gradients are
clipped once, like a single large batch.

Every ``train``/``learn_on_batch`` result carries ``num_env_steps_trained`` (= rows of the
batch, counted once per call, not once per minibatch pass) and ``num_grad_steps``.
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

import gymnasium as gym
import numpy as np
import torch

from plangraph.errors import NonFiniteGradientError
from plangraph.ops.policies import AlgorithmConfig, OptimizerSettings
from plangraph.rl.advantage_norm import AdvantageNormTerms
from plangraph.rl.postprocessing import Fragment
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sequences import (
    PREV_ACTIONS,
    PREV_REWARDS,
    SEQ_BEGIN,
    STATE_PREFIX,
    seq_begin,
    sequence_layout,
    sequence_minibatch_indices,
)

Stats = dict[str, Any]
"""Learner stats: ``str -> float`` (plus ``td_error: float32 [B]`` for DQN)."""

ConfigT = TypeVar("ConfigT", bound=AlgorithmConfig, covariant=True)
"""The config model a policy class trains with (``A2CConfig`` for ``A2CPolicy``, ...).
Covariant: a policy's ``config`` is read-only, so an ``A2CPolicy`` is a
``TorchPolicy[AlgorithmConfig]``."""


def piecewise_linear(points: tuple[tuple[int, float], ...], x: float) -> float:
    """Linear interpolation through ``(x, y)`` points; constant before the first/after the last."""
    xs = np.array([p[0] for p in points], dtype=np.float64)
    ys = np.array([p[1] for p in points], dtype=np.float64)
    return float(np.interp(x, xs, ys))


def to_tensor(arr: np.ndarray) -> torch.Tensor:
    """Zero-copy tensor view of a numpy array, also for read-only arrays (from Ray's store).

    The tensor must not be written to: batches from the object store are shared memory.
    """
    arr = np.asarray(arr)
    if arr.flags.writeable:
        return torch.from_numpy(arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(arr)


def inference() -> contextlib.AbstractContextManager[Any]:
    """``torch.inference_mode()`` for acting, or nothing where it is on already: a rollout
    worker runs a whole fragment in it, and entering it around each small forward pass
    costs more than the pass's arithmetic (measured about 10 us a vector step between
    CartPole env steps)."""
    if torch.is_inference_mode_enabled():
        return contextlib.nullcontext()
    return torch.inference_mode()


def resolve_device(device: str = "cpu") -> torch.device:
    """``"auto"`` -> CUDA when torch sees a GPU (``torch.cuda.is_available()``), else the
    CPU; ``"cpu"``; ``"cuda"`` (``"cuda:N"``).

    Raises:
        ValueError: an unknown device name, or ``"cuda"`` when torch sees no GPU (the
            message says what torch reports).
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            build = (
                "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
            )
            raise ValueError(
                f'learner device "{device}": torch {torch.__version__} ({build}) sees no '
                'CUDA device here; use device "auto" (CUDA when present) or "cpu"'
            )
        return torch.device(device)
    raise ValueError(f'learner device {device!r}: expected "auto", "cpu" or "cuda"')


class TorchPolicy(Generic[ConfigT]):
    """Base class of the A2C, PPO, DQN, IMPALA, APPO and SAC policies (``make_policy``
    builds them).

    Generic in its config model: each algorithm's class names its own
    (``class PPOPolicy(ActorCriticPolicy[PPOConfig])``, ``config_type = PPOConfig``), so
    ``self.config`` has that model's fields.

    Args:
        observation_space: a ``gymnasium.spaces.Box`` (any dtype, any shape).
        action_space: one of the config's ``action_spaces`` (``Discrete``; the
            actor-critic policies also ``MultiDiscrete`` and 1-D ``Box``).
        config: the algorithm's config model from ``plangraph.ops.policies`` (an instance
            of the class's ``config_type``).
        seed: seeds the torch initialisation (without touching torch's global RNG), action
            sampling and minibatch shuffling.
        device: where the model trains (``resolve_device``: ``"auto"``, ``"cpu"``,
            ``"cuda"``). The weights are initialised on the CPU and then moved, so a seed
            gives the same initial weights on every device; batches are copied to the
            device from pinned memory; ``get_weights`` always returns CPU arrays.

    Raises:
        TypeError: ``config`` is not a ``config_type`` (e.g. a ``PPOConfig`` given to
            ``A2CPolicy``, or a dict: ``make_policy`` validates dicts).
        ValueError: an unsupported observation or action space, or a CUDA device torch
            does not see.
    """

    #: the config model this class trains with (set by each algorithm's class)
    config_type: type[ConfigT]
    #: batch columns the loss reads (converted to tensors once per ``train`` call)
    loss_columns: tuple[str, ...] = ()
    #: the ones among them a batch may lack (e.g. ``weights`` without prioritized replay)
    optional_loss_columns: tuple[str, ...] = (SampleBatch.WEIGHTS,)

    def __init__(
        self,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        config: ConfigT,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        if not isinstance(config, self.config_type):
            algo = f" (algo={config.algo!r})" if isinstance(config, AlgorithmConfig) else ""
            raise TypeError(
                f"{type(self).__name__} takes a config of type {self.config_type.__name__}, "
                f"got {type(config).__name__}{algo}; make_policy builds the policy class of "
                "a config's algo (and validates a dict)"
            )
        self._config = config
        self.device = resolve_device(device)
        if not isinstance(observation_space, gym.spaces.Box):
            raise ValueError(
                f"{type(self).__name__} needs a Box observation space, got {observation_space}"
            )
        if type(action_space).__name__ not in config.action_spaces:
            raise ValueError(
                f"{type(self).__name__} acts in {' and '.join(sorted(config.action_spaces))} "
                f"action spaces only, got {action_space}"
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_dim = int(np.prod(observation_space.shape))
        #: number of discrete actions (0 for other action spaces)
        self.num_actions = (
            int(action_space.n) if isinstance(action_space, gym.spaces.Discrete) else 0
        )
        self.global_timestep = 0
        act_seq, sgd_seq = np.random.SeedSequence(int(seed)).spawn(2)
        self._action_rng = np.random.default_rng(act_seq)
        self._sgd_rng = np.random.default_rng(sgd_seq)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            self.model = self.build_model()
        if self.device.type != "cpu":
            # Every module the policy holds (the model, a target network).
            for value in vars(self).values():
                if isinstance(value, torch.nn.Module):
                    value.to(self.device)
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self._optimizers: dict[str, torch.optim.Optimizer] | None = None

    @property
    def action_rng(self) -> np.random.Generator:
        """The seeded generator to act with (exploration noise, sampling actions): derived
        from the policy's seed, separate per rollout worker, saved in checkpoints and in
        a worker's sampling state."""
        return self._action_rng

    @property
    def config(self) -> ConfigT:
        """The algorithm's config model (read-only: the policy was built for it)."""
        return self._config

    # --- to implement -----------------------------------------------------------------
    def build_model(self) -> torch.nn.Module:
        raise NotImplementedError

    def compute_loss(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[torch.Tensor, Stats]:
        """Scalar loss and stats of one (mini)batch given as tensors (``loss_columns``);
        ``with_stats=False``: the loss only (stats ``{}``), for SGD passes whose stats
        nobody reads. The one loss of a policy with one optimizer (``compute_losses``)."""
        raise NotImplementedError

    def compute_losses(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[dict[str, torch.Tensor], Stats]:
        """One scalar loss per optimizer (the names of ``optimizer_params``), all from the
        same parameters: each optimizer steps with the gradient of its own loss with
        respect to its own parameters, after every gradient is computed (as RLlib's and
        TorchRL's learners: an actor loss that reads the critics moves the actor only). A
        name left out is not stepped this time (e.g. TD3's delayed actor updates).
        Default: ``{"optimizer": compute_loss(t)}``."""
        loss, stats = self.compute_loss(t, with_stats)
        return {"optimizer": loss}, stats

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions for ``obs [B, *obs_shape]``: ``(actions [B, *action_shape], extra
        columns)``; int64 for discrete actions, float32 (unclipped) for Box ones. A rollout
        worker records every extra array (``[B, ...]``) as a column of the fragment."""
        raise NotImplementedError

    # --- recurrent policies (docs/recurrent.md) ---------------------------------------
    #: recurrent policies: the most rows of one training sequence (``sequences``)
    max_seq_len: int = 20

    @property
    def is_recurrent(self) -> bool:
        """Whether the policy carries a state from step to step: a rollout worker then
        acts through ``compute_actions_recurrent``, keeps each sub-env's state and records
        it (``plangraph.rl.sequences``), and the learner trains on whole sequences."""
        return False

    def initial_state(self, n: int) -> dict[str, np.ndarray]:
        """The state of ``n`` fresh episodes, ``{"state_in_<name>": float32 [n, ...]}``;
        ``{}`` for a policy without state."""
        return {}

    def compute_actions_recurrent(
        self, obs: np.ndarray, inputs: Mapping[str, np.ndarray], explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """One step of a recurrent policy for ``obs [B, *obs_shape]``.

        Args:
            inputs: the state before this step (``state_in_<name>`` ``[B, ...]``, as
                ``initial_state``), ``prev_actions [B, *action_shape]`` and
                ``prev_rewards`` float32 ``[B]`` (zero at an episode's first step).

        Returns:
            ``(actions, extras, state)``: as ``compute_actions``, plus the state after
            this step (the same keys as ``initial_state``).
        """
        raise NotImplementedError(f"{type(self).__name__} is not a recurrent policy")

    def postprocess_fragment(self, fragment: Fragment) -> dict[str, np.ndarray]:
        """The algorithm's postprocessing of a sampled fragment (``plangraph.rl.
        postprocessing.Fragment``, ``[N, T, ...]`` columns), on the rollout worker,
        before the rows are flattened: the columns to add or replace, each ``[N, T,
        ...]``. Default: none. The built-ins return GAE advantages (A2C, PPO), V-trace
        segments (IMPALA, APPO) or replay transitions (DQN, SAC)."""
        return {}

    # --- optimizers -------------------------------------------------------------------
    def optimizer_params(self) -> dict[str, list[torch.nn.Parameter]]:
        """The parameters of each optimizer the policy steps, by name, in the order the
        gradients are laid out (``compute_gradients``). Default: one optimizer,
        ``"optimizer"``, over every trainable parameter of the model."""
        return {"optimizer": self._params}

    def learning_rate(self, name: str) -> float:
        """The learning rate of optimizer ``name`` now; default ``cur_lr`` for all."""
        return self.cur_lr

    @property
    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The policy's optimizers by name (``build_optimizer`` of the config's
        ``optimizer`` settings for each of ``optimizer_params``), built
        on first use (``build_optimizers``) at the current learning rate: a rollout
        worker's copy of the policy only acts and never builds one (building a
        ``torch.optim`` optimizer imports torch's compiler stack, about 1.5 s of CPU per
        process)."""
        return self.build_optimizers()

    def build_optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Build the optimizers now, unless built already, and return them: a worker set
        builds its learner's while its rollout workers start, so that the first update
        does not wait for it."""
        if self._optimizers is None:
            settings = self.config.optimizer
            self._optimizers = {
                name: build_optimizer(settings, params, self.learning_rate(name))
                for name, params in self.optimizer_params().items()
            }
        return self._optimizers

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The optimizer named ``"optimizer"``: the only one of a policy with one.

        Raises:
            KeyError: the policy names its optimizers otherwise (``optimizers``).
        """
        return self.optimizers["optimizer"]

    # --- schedules --------------------------------------------------------------------
    @property
    def cur_lr(self) -> float:
        """Learning rate at ``global_timestep`` (``lr_schedule`` if set, else ``lr``)."""
        if self.config.lr_schedule:
            return piecewise_linear(self.config.lr_schedule, self.global_timestep)
        return float(self.config.lr)

    def set_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """``{"timestep": num_env_steps_sampled}`` drives the lr schedule (and epsilon)."""
        if "timestep" in global_vars:
            self.global_timestep = int(global_vars["timestep"])
        if self._optimizers is None:  # built at the learning rate of its first use
            return
        for name, optimizer in self._optimizers.items():
            lr = self.learning_rate(name)
            for group in optimizer.param_groups:
                group["lr"] = lr

    # --- batches ----------------------------------------------------------------------
    def tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        """The ``loss_columns`` of ``batch`` as tensors on the learner's device (zero-copy
        views on the CPU: never write to them), those of ``optional_loss_columns`` only
        where the batch has them.

        Raises:
            KeyError: a required loss column is missing (the message says which, and asks
                whether the batch was postprocessed for this algorithm).
        """
        cols = [c for c in self.loss_columns if c in batch]
        missing = [
            c for c in self.loss_columns if c not in batch and c not in self.optional_loss_columns
        ]
        if missing:
            raise KeyError(
                f"{type(self).__name__} needs batch columns {missing}, batch has "
                f"{sorted(batch.keys())}; was the batch postprocessed for "
                f"algo={self.config.algo!r}?"
            )
        t = {c: self.to_device(to_tensor(batch[c])) for c in cols}
        if self.is_recurrent:
            for c in batch.keys():
                if c.startswith(STATE_PREFIX) or c in (PREV_ACTIONS, PREV_REWARDS):
                    t[c] = self.to_device(to_tensor(batch[c]))
            t[SEQ_BEGIN] = self.to_device(torch.from_numpy(seq_begin(batch, self.max_seq_len)))
        return t

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (on the CPU) on the learner's device: itself on the CPU; on CUDA a
        copy through pinned (page-locked) host memory, asynchronous to the host."""
        if self.device.type == "cpu":
            return tensor
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def obs_tensor(self, obs: np.ndarray) -> torch.Tensor:
        """``obs [B, *obs_shape]`` as a tensor on the learner's device (for acting in the
        driver: evaluation, ``compute_actions``)."""
        return self.to_device(to_tensor(np.asarray(obs)))

    # --- gradients --------------------------------------------------------------------
    def _grads(
        self, t: Mapping[str, torch.Tensor], with_stats: bool = True
    ) -> tuple[dict[str, list[torch.Tensor]], Stats]:
        """Each loss's gradient w.r.t. its optimizer's parameters (zeros where unused)."""
        losses, stats = self.compute_losses(t, with_stats)
        params = self.optimizer_params()
        unknown = sorted(set(losses) - set(params))
        if unknown:
            raise KeyError(
                f"{type(self).__name__}.compute_losses returned losses {unknown} for no "
                f"optimizer; its optimizers are {sorted(params)} (optimizer_params)"
            )
        out: dict[str, list[torch.Tensor]] = {}
        names = [n for n in params if n in losses]
        for i, name in enumerate(names):
            raw = torch.autograd.grad(
                losses[name], params[name], retain_graph=i < len(names) - 1, allow_unused=True
            )
            out[name] = [
                torch.zeros_like(p) if g is None else g
                for g, p in zip(raw, params[name], strict=True)
            ]
        return out, stats

    def param_grads(self, loss: torch.Tensor, retain_graph: bool) -> list[np.ndarray]:
        """``d loss / d params`` as float64 numpy arrays, one per parameter of every
        optimizer in ``optimizer_params`` order (zeros for parameters the loss skips)."""
        params = self._flat_params()
        grads = torch.autograd.grad(loss, params, retain_graph=retain_graph, allow_unused=True)
        return [
            np.zeros(tuple(p.shape)) if g is None else g.detach().cpu().numpy().astype(np.float64)
            for g, p in zip(grads, params, strict=True)
        ]

    def advantage_norm_terms(self, batch: SampleBatch) -> AdvantageNormTerms | None:
        """The split gradient ``AverageGradients`` pools when advantages are standardised
        per train batch (``plangraph.rl.advantage_norm``); ``None`` (the default) when the
        loss has no batch statistic, so per-row-mean gradients average exactly by rows."""
        return None

    def _apply(self, grads: dict[str, list[torch.Tensor]], with_stats: bool = True) -> Stats:
        """Clip each optimizer's gradient to ``grad_clip`` (global L2 norm over its
        parameters) and step it. Stats: ``grad_gnorm`` (the first optimizer's norm before
        clipping), ``<name>_grad_gnorm`` for the others, ``cur_lr``.

        The norm is checked at every step (one scalar read): this, not argument validation
        inside ``torch.distributions`` at every minibatch, is what stops a NaN.

        Raises:
            NonFiniteGradientError: an optimizer's gradient norm is NaN or infinite; it is
                not stepped (nor any after it), its gradients are cleared.
        """
        stats: Stats = {}
        params = self.optimizer_params()
        for i, (name, gs) in enumerate(grads.items()):
            ps = params[name]
            for p, g in zip(ps, gs, strict=True):
                p.grad = g
            optimizer = self.optimizers[name]
            if self.config.grad_clip is not None:
                gnorm = torch.nn.utils.clip_grad_norm_(ps, self.config.grad_clip)
            else:
                gnorm = torch.nn.utils.get_total_norm(gs)
            norm = float(gnorm)
            if not math.isfinite(norm):
                optimizer.zero_grad(set_to_none=True)
                raise self._non_finite(name, norm, len(ps))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if with_stats:
                stats["grad_gnorm" if i == 0 else f"{name}_grad_gnorm"] = norm
                if i == 0:
                    stats["cur_lr"] = float(optimizer.param_groups[0]["lr"])
        return stats

    def _non_finite(self, name: str, norm: float, num_params: int) -> NonFiniteGradientError:
        return NonFiniteGradientError(
            f"{type(self).__name__} ({self.config.algo}): the gradient of the {name!r} loss "
            f"is not finite (global L2 norm {norm} over its {num_params} parameter tensors) "
            f"at {self.global_timestep} env steps, so optimizer {name!r} was not stepped and "
            "the weights are those before this minibatch. NaN or infinite gradients come "
            "from NaN/inf inputs (observations or rewards: check the env, its wrappers or "
            "the dataset) or from a loss that diverged (lower lr, set grad_clip, normalise "
            "observations)"
        )

    def _flat_params(self) -> list[torch.nn.Parameter]:
        """Every optimizer's parameters, in ``optimizer_params`` order."""
        return [p for ps in self.optimizer_params().values() for p in ps]

    def compute_gradients(self, batch: SampleBatch) -> tuple[list[np.ndarray], Stats]:
        """Raw (unclipped) gradients of the loss on ``batch``; no optimizer step.

        Returns:
            ``(grads, stats)``: one float32 array per parameter, in ``model.parameters()``
            order, and the learner stats of the batch.
        """
        per_optimizer, stats = self._grads(self.tensors(batch))
        missing = sorted(set(self.optimizer_params()) - set(per_optimizer))
        if missing:
            raise ValueError(
                f"{type(self).__name__} computed no loss for optimizers {missing} on this "
                "batch, so its gradients cannot be laid out for ApplyGradients"
            )
        grads = [g for gs in per_optimizer.values() for g in gs]
        stats["grad_gnorm"] = float(
            torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
        )
        return [g.detach().cpu().numpy().copy() for g in grads], stats

    def apply_gradients(self, grads: list[np.ndarray]) -> Stats:
        """One optimizer step with ``grads`` (clipped to ``grad_clip`` global L2 norm).

        Raises:
            ValueError: wrong number or shapes of gradient arrays.
        """
        flat = self._flat_params()
        if len(grads) != len(flat):
            raise ValueError(f"expected {len(flat)} gradient arrays, got {len(grads)}")
        tensors = []
        for i, (g, p) in enumerate(zip(grads, flat, strict=True)):
            if tuple(np.shape(g)) != tuple(p.shape):
                raise ValueError(
                    f"gradient {i} has shape {np.shape(g)}, parameter has {tuple(p.shape)}"
                )
            tensors.append(torch.tensor(np.asarray(g), dtype=p.dtype, device=p.device))
        per_optimizer: dict[str, list[torch.Tensor]] = {}
        start = 0
        for name, ps in self.optimizer_params().items():
            per_optimizer[name] = tensors[start : start + len(ps)]
            start += len(ps)
        return self._apply(per_optimizer)

    def _learn_on_tensors(self, t: Mapping[str, torch.Tensor], with_stats: bool = True) -> Stats:
        grads, stats = self._grads(t, with_stats)
        try:
            stats.update(self._apply(grads, with_stats))
        except NonFiniteGradientError as exc:
            bad = _non_finite_columns(t)
            if not bad:
                raise
            raise NonFiniteGradientError(f"{exc}; in this minibatch: {bad}") from None
        return stats

    def learn_on_batch(self, batch: SampleBatch) -> Stats:
        """One optimizer step on the whole batch; learner stats."""
        stats = self._learn_on_tensors(self.tensors(batch))
        stats["num_env_steps_trained"] = batch.count
        stats["num_grad_steps"] = 1
        return stats

    def train(
        self, batch: SampleBatch, num_sgd_iter: int = 1, sgd_minibatch_size: int = 0
    ) -> Stats:
        """SGD on one train batch (the ``TrainOneStep`` operator calls this).

        Args:
            batch: a postprocessed train batch of ``B`` rows.
            num_sgd_iter: epochs over the batch (>= 1).
            sgd_minibatch_size: rows per minibatch; 0 = the whole batch per step.

        Returns:
            Stats averaged over the last epoch's minibatches; per-row arrays (``td_error``)
            are reassembled into batch row order; ``num_env_steps_trained == B``.

        Raises:
            ValueError: ``num_sgd_iter < 1`` or ``sgd_minibatch_size < 0``.
        """
        if num_sgd_iter < 1:
            raise ValueError(f"num_sgd_iter must be >= 1, got {num_sgd_iter}")
        if sgd_minibatch_size < 0:
            raise ValueError(f"sgd_minibatch_size must be >= 0, got {sgd_minibatch_size}")
        if batch.count == 0:
            raise ValueError("cannot train on an empty SampleBatch")
        if num_sgd_iter == 1 and sgd_minibatch_size == 0:
            return self.learn_on_batch(batch)
        t = self.tensors(batch)
        steps = 0
        last: list[tuple[np.ndarray, Stats]] = []
        for epoch in range(num_sgd_iter):
            final = epoch == num_sgd_iter - 1
            idxs = list(self._minibatch_indices(batch, sgd_minibatch_size))
            # One gather per column and epoch, in minibatch order; each minibatch is then a
            # slice of it (a view, no copy): the same rows as gathering each one alone.
            order = torch.from_numpy(np.concatenate(idxs) if len(idxs) > 1 else idxs[0])
            order = order.to(self.device)
            shuffled = {k: v[order] for k, v in t.items()}
            start = 0
            for idx in idxs:
                stop = start + idx.size
                rows = {k: v[start:stop] for k, v in shuffled.items()}
                start = stop
                # Only the last epoch's stats are reported: skip computing the others.
                stats = self._learn_on_tensors(rows, final)
                steps += 1
                if final:
                    last.append((idx, stats))
        out = _merge_minibatch_stats(last, batch.count)
        out["num_env_steps_trained"] = batch.count
        out["num_grad_steps"] = steps
        return out

    def _minibatch_indices(self, batch: SampleBatch, size: int) -> Iterator[np.ndarray]:
        """Row indices of one epoch's minibatches (int64 arrays covering every row once).

        Shuffled rows by default; a recurrent policy's are whole sequences
        (``sequences.sequence_minibatch_indices``); policies whose loss needs whole
        trajectory segments (V-trace) override this.
        """
        if self.is_recurrent:
            starts, lens = sequence_layout(batch, self.max_seq_len)
            return sequence_minibatch_indices(starts, lens, size, self._sgd_rng)
        return batch.minibatch_indices(size, rng=self._sgd_rng)

    # --- weights and state ------------------------------------------------------------
    def get_weights(self) -> dict[str, np.ndarray]:
        """Model weights as ``name -> numpy copy`` on the CPU, whatever the learner's device
        (what rollout workers need: they sample on the CPU)."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Load weights from ``get_weights()`` of a policy with the same config.

        Raises:
            ValueError: the weight names or shapes do not match this model.
        """
        state = self.model.state_dict()
        if set(weights) != set(state):
            raise ValueError(
                f"weights do not match the model: missing {sorted(set(state) - set(weights))}, "
                f"unexpected {sorted(set(weights) - set(state))}"
            )
        with torch.no_grad():
            for k, tensor in state.items():
                src = to_tensor(np.asarray(weights[k]))
                if tuple(src.shape) != tuple(tensor.shape):
                    raise ValueError(
                        f"weight {k!r} has shape {tuple(src.shape)}, model has "
                        f"{tuple(tensor.shape)}"
                    )
                tensor.copy_(src)

    def has_optimizer_state(self) -> bool:
        """Whether an optimizer of this policy has stepped and keeps state (Adam's moments
        and step count): a rollout worker's copy never does, unless it trains on the
        worker (DD-PPO), and ``get_sampling_state`` does not save it."""
        return self._optimizers is not None and any(opt.state for opt in self._optimizers.values())

    def get_sampling_state(self) -> dict[str, Any]:
        """What a rollout worker's copy of the policy carries between fragments, as plain
        data: ``weights`` (as last received), ``global_timestep`` (env steps; drives
        epsilon) and ``action_rng`` (the ``bit_generator.state`` of the action sampler).
        No optimizer: a worker's copy never steps one."""
        return {
            "weights": self.get_weights(),
            "global_timestep": self.global_timestep,
            "action_rng": self._action_rng.bit_generator.state,
        }

    def set_sampling_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_sampling_state()``.

        Raises:
            ValueError: the weights do not match this model.
        """
        self.set_weights(state["weights"])
        self._action_rng.bit_generator.state = state["action_rng"]
        self.set_global_vars({"timestep": state["global_timestep"]})

    def held_modules(self) -> dict[str, torch.nn.Module]:
        """Every torch module the policy holds besides ``model``, by attribute name: an
        attribute that is a module (``target_model``) or a list of modules
        (``target_critics.0``, ``target_critics.1``). ``get_state`` saves them and
        ``set_state`` restores them, so a target network survives a checkpoint without
        code of its own."""
        out: dict[str, torch.nn.Module] = {}
        for name, value in vars(self).items():
            if name == "model":
                continue
            if isinstance(value, torch.nn.Module):
                out[name] = value
            elif (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(v, torch.nn.Module) for v in value)
            ):
                out.update({f"{name}.{i}": v for i, v in enumerate(value)})
        return dict(sorted(out.items()))

    def get_state(self) -> dict[str, Any]:
        """Everything to resume learning: weights, the other modules it holds
        (``held_modules``: target networks), optimizers, global vars, RNG states."""
        return {
            "weights": self.get_weights(),
            "modules": {
                name: {k: v.detach().cpu().numpy().copy() for k, v in m.state_dict().items()}
                for name, m in self.held_modules().items()
            },
            "optimizers": {
                name: copy.deepcopy(opt.state_dict()) for name, opt in self.optimizers.items()
            },
            "global_timestep": self.global_timestep,
            "action_rng": self._action_rng.bit_generator.state,
            "sgd_rng": self._sgd_rng.bit_generator.state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_state()``."""
        self.set_weights(state["weights"])
        held = self.held_modules()
        modules = state.get("modules")
        if modules is None and "target_weights" in state:
            # Checkpoints written before held modules were saved by this class: the
            # algorithm saved its target network(s) as "target_weights".
            legacy = state["target_weights"]
            modules = dict(zip(held, legacy if isinstance(legacy, list) else [legacy], strict=True))
        missing = sorted(set(held) - set(modules or {}))
        if missing:
            raise ValueError(
                f"the saved state has no weights for {missing} of {type(self).__name__}; "
                "it was saved by another policy class"
            )
        for name, module in held.items():
            assert modules is not None  # missing is empty
            device = next(iter(module.parameters()), torch.zeros(0)).device
            module.load_state_dict(
                {k: torch.tensor(np.asarray(v), device=device) for k, v in modules[name].items()}
            )
        # deepcopy: torch keeps references to same-dtype tensors, so two policies restored
        # from one state would otherwise share (and both mutate) the Adam moments.
        saved = state["optimizers"] if "optimizers" in state else {"optimizer": state["optimizer"]}
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(copy.deepcopy(saved[name]))
        self._action_rng.bit_generator.state = state["action_rng"]
        self._sgd_rng.bit_generator.state = state["sgd_rng"]
        self.set_global_vars({"timestep": state["global_timestep"]})


def build_optimizer(
    settings: OptimizerSettings, params: list[torch.nn.Parameter], lr: float
) -> torch.optim.Optimizer:
    """The ``torch.optim`` optimizer ``settings`` names (``plangraph.ops.policies.
    OptimizerSettings``) over ``params`` at learning rate ``lr``.

    Adam and AdamW use torch's fused kernel (``fused=True``: one kernel for all
    parameters, on the CPU and on CUDA): the learner makes thousands of steps on small
    networks, where the per-tensor Python loop of the default (``foreach``) implementation
    costs more than the arithmetic (a DQN update: 0.3 ms of Adam out of 1 ms); the fused
    kernel computes the same update.
    """
    s = settings
    if s.type == "adam":
        return torch.optim.Adam(
            params, lr=lr, betas=s.betas, eps=s.eps, weight_decay=s.decay, fused=True
        )
    if s.type == "adamw":
        return torch.optim.AdamW(
            params, lr=lr, betas=s.betas, eps=s.eps, weight_decay=s.decay, fused=True
        )
    if s.type == "rmsprop":
        return torch.optim.RMSprop(
            params,
            lr=lr,
            alpha=s.alpha,
            eps=s.eps,
            weight_decay=s.decay,
            momentum=s.momentum,
            centered=s.centered,
        )
    return torch.optim.SGD(
        params, lr=lr, momentum=s.momentum, weight_decay=s.decay, nesterov=s.nesterov
    )


def _non_finite_columns(t: Mapping[str, torch.Tensor]) -> str:
    """``"NaN or infinite values in column 'obs' (3 of 256 rows), ..."`` for the float
    columns of a minibatch that hold such values; ``""`` when none does (the loss
    diverged)."""
    found = []
    for name, value in sorted(t.items()):
        if not value.is_floating_point() or value.ndim == 0:
            continue
        rows = (~torch.isfinite(value)).reshape(value.shape[0], -1).any(dim=1)
        if bool(rows.any()):
            found.append(f"column {name!r} ({int(rows.sum())} of {value.shape[0]} rows)")
    return f"NaN or infinite values in {', '.join(found)}" if found else ""


def _merge_minibatch_stats(last: list[tuple[np.ndarray, Stats]], count: int) -> Stats:
    out: Stats = {}
    if not last:
        return out
    for key, first in last[0][1].items():
        if isinstance(first, np.ndarray) and first.ndim == 1:
            full = np.zeros(count, dtype=first.dtype)
            for idx, stats in last:
                full[idx] = stats[key]
            out[key] = full
        else:
            out[key] = float(np.mean([stats[key] for _, stats in last]))
    return out
