"""Where operator implementations are registered and found.

A *lowering* turns one compiled plan node into its output stream:
``lowering(node, inputs, ctx) -> LocalIterator``. Built-in operators register theirs in
``plangraph/runtime/ops/<category>.py`` with :func:`register_lowering`; user operators
(``plangraph.ops.register_op``) register a per-item callable factory with
:func:`register_impl` (or a full lowering). :func:`implementation` finds the one for a node.

Per-item operators (``apply="for_each"``) also have an *item function*: the callable that
maps one item, which the lowering wraps in a ``for_each`` stage. Built-ins declare it with
:func:`register_map` (which registers the standard lowering too); a user operator's is its
``register_impl`` factory's result. :func:`item_function` finds it, so that a fused stage
(pass ``map-fusion``) can call several in one stage and the rollout workers can run a pure
one (pass ``worker-side-maps``).
"""

from __future__ import annotations

import collections
import inspect
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from plangraph.errors import BuildError, RegistrationError
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext

__all__ = [
    "LOWERINGS",
    "MAPS",
    "OP_IMPLS",
    "ImplFactory",
    "Lowering",
    "MapFactory",
    "OperatorContext",
    "has_item_function",
    "implementation",
    "item_function",
    "register_impl",
    "register_lowering",
    "register_map",
    "timed",
]

Lowering = Callable[[Any, list[LocalIterator[Any]], BuildContext], LocalIterator[Any]]
LOWERINGS: dict[str, Lowering] = {}
ImplFactory = Callable[..., Callable[..., Any]]
"""``factory(params)`` or ``factory(params, op: OperatorContext)`` -> the item callable."""
OP_IMPLS: dict[str, ImplFactory] = {}
_WANTS_CONTEXT: dict[str, bool] = {}
"""Op name -> whether its ``register_impl`` factory takes the ``OperatorContext``."""
MapFactory = Callable[[Any, BuildContext], Callable[[Any], Any]]
MAPS: dict[str, MapFactory] = {}


class OperatorContext:
    """What a user operator's ``register_impl`` factory gets besides its params: what a
    built-in's lowering reads from the ``BuildContext``, for one node.

    Attributes:
        node_id: the plan node this operator runs as.
        seed: the run seed (``plangraph run --seed``, ``build(seed=...)``).
        build: the whole ``BuildContext`` (resources by id: ``build.worker_set("@workers")``,
            ``build.buffer("@replay")``; ``build.run_state``), for operators that need more.
        on_workers: the node runs on the rollout workers (pass ``worker-side-maps`` moved
            this ``pure`` operator there, or it is a per-shard operator), where the driver
            keeps no state or RNG for it (a per-shard operator keeps its state on the worker:
            ``worker.shard_state``).
        per_shard: the node is a per-shard operator (``placement="shard"``; implies
            ``on_workers``).
    """

    def __init__(
        self,
        node_id: str,
        build: BuildContext,
        *,
        on_workers: bool = False,
        per_shard: bool = False,
    ) -> None:
        self.node_id = node_id
        self.build = build
        self.seed = build.seed
        self.on_workers = on_workers or per_shard
        self.per_shard = per_shard
        self._rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        """This node's own ``numpy`` generator, derived from the run seed and the node id
        (``BuildContext.node_rng``): the same stream in every run of the same seed. It is
        state: save ``rng.bit_generator.state`` with :meth:`save_state`, or a checkpoint
        warns (``ResumeWarning``).

        Raises:
            BuildError: the node runs on the rollout workers (declared ``pure``).
        """
        if self._rng is None:
            self._refuse_on_workers("an RNG", "rng")
            self._rng = self.build.node_rng(self.node_id)
        return self._rng

    @property
    def counters(self) -> collections.defaultdict[str, int]:
        """The run's counters (``num_env_steps_sampled``, ...; ``plangraph.runtime.counters``
        has the built-ins' names): read them, or add counters of your own, which results
        report and checkpoints keep."""
        return self.build.run_state.counters

    def save_state(
        self, get_state: Callable[[], dict[str, Any]], set_state: Callable[[dict[str, Any]], None]
    ) -> None:
        """Checkpoint this operator's state: ``get_state()`` returns a plain data tree
        (dicts with str keys, lists, str/int/float/bool/None, numpy arrays; no objects: a
        checkpoint holds data, never code) and ``set_state(tree)`` puts it back, on restore,
        before the restored run's first item.

        Raises:
            BuildError: the node runs on the rollout workers (declared ``pure``).
            ValueError: called twice for this node.
        """
        self._refuse_on_workers("state", "save_state")
        self.build.register_operator_state(self.node_id, get_state, set_state)

    def record_sampled(
        self, env_steps: int, episode_returns: Any = (), episode_lengths: Any = ()
    ) -> None:
        """Count what a source produced as the built-in sources do (``num_env_steps_sampled``
        and the episode window): see ``BuildContext.record_sampled``.

        Raises:
            ValueError: ``env_steps`` < 0, or returns and lengths differ in size.
        """
        self.build.record_sampled(env_steps, episode_returns, episode_lengths)

    def record_batch(self, batch: Any) -> None:
        """:meth:`record_sampled` for a ``SampleBatch`` (``env_steps()``, and its
        ``episode_returns``/``episode_lengths``)."""
        self.build.record_batch(batch)

    def _refuse_on_workers(self, what: str, attr: str) -> None:
        if self.on_workers:
            if self.per_shard:
                raise BuildError(
                    f"node {self.node_id!r}: its per-shard operator's register_impl factory "
                    f"took op.{attr}, but the operator runs inside the rollout workers, "
                    f"where the driver cannot keep {what} for it; {_ON_THE_WORKER[attr]}"
                )
            raise BuildError(
                f"node {self.node_id!r}: its operator is declared pure=True and runs on the "
                f"rollout workers (pass worker-side-maps), where it cannot keep {what}; "
                "declare it without pure=True"
            )


_ON_THE_WORKER = {
    "rng": "make the generator in fn(worker, item) and keep it in worker.shard_state[node "
    "id], seeded from the run seed and the worker (seed = op.seed in the factory, then "
    "np.random.default_rng([seed, worker.index]) in fn)",
    "save_state": "keep the state in worker.shard_state[node id] in fn(worker, item) (it is "
    "not checkpointed; a replaced worker starts afresh)",
}
"""How a per-shard operator does without ``op.rng`` / ``op.save_state``: on the worker."""


_MUTABLE_STATE = (
    list,
    dict,
    set,
    bytearray,
    collections.deque,
    np.ndarray,
    np.random.Generator,
    np.random.RandomState,
    random.Random,
)
"""Types whose instances, held by an item callable, are state that changes between items."""


def held_state(fn: Any) -> str | None:
    """What state item callable ``fn`` visibly holds between calls (an object's
    attributes, a closure's lists, dicts, arrays and RNGs), or None; a heuristic for the
    warning a checkpoint gives, not a proof."""
    if inspect.isfunction(fn):
        names = fn.__code__.co_freevars
        cells = fn.__closure__ or ()
        held = []
        for name, cell in zip(names, cells, strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, _MUTABLE_STATE):
                held.append(f"{name} ({type(value).__name__})")
        return f"its item function holds {', '.join(held)}" if held else None
    owner = fn.__self__ if inspect.ismethod(fn) else fn
    attrs = sorted(getattr(owner, "__dict__", {}) or ())
    if attrs and not inspect.isroutine(owner) and not inspect.isclass(owner):
        return f"its {type(owner).__name__} object keeps attributes {', '.join(attrs)}"
    return None


def _wants_context(op: str, factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` takes ``(params, op)`` (True) or ``(params)`` (False).

    Raises:
        RegistrationError: it takes neither.
    """
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: the old form
        return False
    positional = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()) or len(positional) == 2:
        return True
    if len(positional) == 1:
        return False
    raise RegistrationError(
        f"register_impl({op!r}): the factory must take (params) or (params, op), "
        f"got {factory.__name__}{sig}"
    )


def register_impl(op: str) -> Callable[[ImplFactory], ImplFactory]:
    """Register how a user operator (``plangraph.ops.register_op``) runs.

    The decorated factory gets the node's validated ``Params`` (and, if it takes a second
    argument, the node's :class:`OperatorContext`: run seed, a per-node RNG, the run's
    counters, ``save_state`` for checkpoints, ``record_sampled`` for sources) and returns
    the callable, applied as the operator's signature declares: ``for_each`` (item ->
    item), ``combine`` (item -> list of items), ``filter`` (item -> bool) or ``source``
    (no argument -> the next item; None ends the stream)::

        @register_impl("ClipRewards")
        def clip_rewards(params):
            def clip(batch):
                batch["rewards"] = np.clip(batch["rewards"], -params.limit, params.limit)
                return batch
            return clip

    The factory is called once per lowering of the plan (again on ``Algorithm.restore``,
    before the checkpoint's operator states are handed back). An operator that keeps state
    between items saves it with ``op.save_state(get_state, set_state)``; one that visibly
    holds state (see :func:`held_state`) or took ``op.rng`` without it gets a
    ``ResumeWarning`` when a checkpoint is written. Inside the callable,
    ``plangraph.flow.metrics.get_metrics()`` is the run's metrics context
    (``RunState.metrics``). Operators with other shapes (whole streams, several inputs)
    register a full lowering with ``register_lowering``.

    Raises:
        RegistrationError: the factory takes neither ``(params)`` nor ``(params, op)``.
    """

    def deco(factory: ImplFactory) -> ImplFactory:
        _WANTS_CONTEXT[op] = _wants_context(op, factory)
        OP_IMPLS[op] = factory
        return factory

    return deco


def _user_callable(node: Any, ctx: BuildContext, *, on_workers: bool = False) -> Any:
    """The callable user operator ``node``'s factory makes, given its context; notes in
    ``ctx.unsaved_states`` state it holds without saving it."""
    factory = OP_IMPLS[node.op]
    if not _WANTS_CONTEXT.get(node.op, False):
        fn = factory(node.params)
    else:
        per_shard = node.signature is not None and node.signature.placement == "shard"
        op = OperatorContext(node.id, ctx, on_workers=on_workers, per_shard=per_shard)
        fn = factory(node.params, op)
    if not on_workers and node.id not in ctx.operator_states:
        held = held_state(fn)
        if held is not None:
            ctx.unsaved_states[node.id] = held
    return fn


def _user_lowering(node: Any) -> Lowering | None:
    """The lowering of a user operator registered with :func:`register_impl`, if any."""
    if node.op not in OP_IMPLS:
        return None
    apply = node.signature.apply
    if node.signature.placement == "shard":
        return _shard_lowering

    def lower(node: Any, inputs: list[LocalIterator[Any]], ctx: BuildContext) -> LocalIterator[Any]:
        if apply not in ("for_each", "combine", "filter", "source"):
            raise NotImplementedError(
                f"node {node.id!r}: register_impl covers for_each/combine/filter/source "
                f"operators; {node.op!r} applies as {apply!r}: use register_lowering"
            )
        fn = _user_callable(node, ctx)  # lower_plan times every node
        if apply == "for_each":
            return inputs[0].for_each(fn, name=node.id)
        if apply == "combine":
            return inputs[0].combine(fn, name=node.id)
        if apply == "filter":
            return inputs[0].filter(fn, name=node.id)
        return LocalIterator.from_iterable(lambda: iter(fn, None), name=node.id)

    return lower


def _shard_lowering(node: Any, inputs: list[Any], ctx: BuildContext) -> Any:
    """A per-shard user operator (``placement="shard"``): its ``register_impl`` factory's
    ``fn(worker, item) -> item`` added to the input ``ShardStream``, to run inside each
    rollout worker (``plangraph.runtime.shards``)."""
    if node.signature.apply != "for_each":
        raise NotImplementedError(
            f"node {node.id!r}: register_impl covers per-shard for_each operators "
            f"(fn(worker, item) -> item); {node.op!r} applies as {node.signature.apply!r}: "
            "use register_lowering (its inputs are plangraph.runtime.shards.ShardStream)"
        )
    fn = _user_callable(node, ctx, on_workers=True)
    return inputs[0].then(node.id, fn)


def register_lowering(op: str) -> Callable[[Lowering], Lowering]:
    """Register the runtime implementation of operator ``op``.

    The function gets ``(node, inputs, ctx)``: the ``CompiledNode`` (validated ``params``),
    its input streams in ``node.inputs`` order, and the ``BuildContext`` (resources by id;
    ``ctx.run_state`` for the run's counters and episode window); it returns the node's
    output stream.
    """

    def deco(fn: Lowering) -> Lowering:
        LOWERINGS[op] = fn
        return fn

    return deco


def register_map(op: str) -> Callable[[MapFactory], MapFactory]:
    """Register a per-item (``for_each``) built-in operator by its item function factory.

    The factory gets ``(node, ctx)`` (the compiled node, the build context) and returns
    ``fn(item) -> item`` (or ``NOT_READY`` to be called again with the same item). The
    operator's lowering is then ``inputs[0].for_each(fn, name=node.id)`` (``lower_plan``
    times it), registered here under the factory's module and name. A pure operator's
    ``fn`` may be pickled and run on the rollout workers: it must not hold ``ctx`` or the
    driver's resources.
    """

    def deco(factory: MapFactory) -> MapFactory:
        def lower(
            node: Any, inputs: list[LocalIterator[Any]], ctx: BuildContext
        ) -> LocalIterator[Any]:
            return inputs[0].for_each(factory(node, ctx), name=node.id)

        lower.__module__ = factory.__module__
        lower.__qualname__ = lower.__name__ = factory.__name__
        lower.__doc__ = factory.__doc__
        MAPS[op] = factory
        LOWERINGS[op] = lower
        return factory

    return deco


def has_item_function(node: Any) -> bool:
    """Whether :func:`item_function` gives ``node`` one (without building it)."""
    if node.op in MAPS:
        return True
    if node.op in LOWERINGS or node.signature is None or node.signature.apply != "for_each":
        return False
    return node.op in OP_IMPLS and node.signature.placement != "shard"


def item_function(
    node: Any, ctx: BuildContext, *, on_workers: bool = False
) -> Callable[[Any], Any] | None:
    """The item function of per-item node ``node``: a built-in's :func:`register_map`
    factory, or a user ``for_each`` operator's :func:`register_impl` factory; None for an
    operator with a whole-stream lowering (or none at all). ``on_workers``: it is made for
    the rollout workers (pass worker-side-maps), where a user operator may keep no state
    (``OperatorContext.on_workers``)."""
    factory = MAPS.get(node.op)
    if factory is not None:
        return factory(node, ctx)
    if node.op in LOWERINGS or node.signature is None or node.signature.apply != "for_each":
        return None
    if node.op not in OP_IMPLS or node.signature.placement == "shard":
        return None  # fn(worker, item): a per-shard operator's is not an item function
    return _user_callable(node, ctx, on_workers=on_workers)


def timed(name: str, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` with its wall time pushed to timer ``name`` of the dataflow's metrics.

    ``lower_plan`` already times every plan node (timer ``<node id>``: exclusive seconds
    per item it emits, see ``plangraph.flow.profile``); use this for a part of an
    operator's work, under a name of its own (``f"{node.id}/encode"``), not the node id.
    """

    def call(item: Any) -> Any:
        with get_metrics().timers[name]:
            return fn(item)

    return call


def implementation(node: Any) -> Lowering | None:
    """The lowering for compiled ``node``: a registered lowering, else a user operator's
    ``register_impl`` factory applied as its signature says; None when there is neither."""
    return LOWERINGS.get(node.op) or _user_lowering(node)
