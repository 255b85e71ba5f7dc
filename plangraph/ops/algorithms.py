"""The algorithm registry: ``algo`` name -> settings model and learner (policy) class.

A worker set's ``policy`` is ``{"algo": NAME, ...settings}``: the compiler validates the
settings against the model registered under ``NAME`` (a subclass of
:class:`~plangraph.ops.policies.AlgorithmConfig`) and reads its capabilities and spaces
from that model's class variables, so ``plangraph validate`` never imports torch. The
learner is the ``TorchPolicy`` subclass (``plangraph.rl.policy``) that trains on those
settings; it is imported only where a plan is built.

The built-in algorithms (``plangraph/algorithms/<name>/``, loaded by ``plangraph.ops`` so
that they are registered whenever this module is) register here exactly as a user's do,
with their policy class given as ``"module:Class"`` text of plangraph's own code so that
registering them imports no torch; a user passes the class itself::

    register_algorithm("td3", config=TD3Config, policy=TD3Policy)

A user's algorithm comes from a Python module: the Python plan itself, or a module named
with ``--import``. A JSON plan names it by its registered name only; nothing in a plan
file names code to import. The config class and the policy class are pickled by
reference when a worker set starts its rollout workers, so the user's module is imported
there too (it must be importable on every node: ``plangraph run`` ships ``--import``
modules with the job).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import TypeAdapter

from plangraph.ops.open_types import OpenSettings
from plangraph.ops.policies import AlgorithmConfig
from plangraph.text import close_matches

__all__ = [
    "AlgorithmSpec",
    "PolicyConfig",
    "algorithm",
    "algorithms",
    "as_policy_config",
    "builtin_algorithms",
    "register_algorithm",
    "unregister_algorithm",
]


@dataclass(frozen=True)
class AlgorithmSpec:
    """One registered algorithm.

    ``name``: the ``algo`` a plan writes; ``config``: its settings model (torch-free);
    ``policy``: its learner class, or ``"module:Class"`` text of it (imported on first
    use); ``doc``: one line for ``plangraph ops``; ``builtin``: one of plangraph's own
    (part of the committed plan schema).
    """

    name: str
    config: type[AlgorithmConfig]
    policy: Any
    doc: str = ""
    builtin: bool = False

    def policy_class(self) -> Any:
        """The learner class (``TorchPolicy`` subclass), importing it if given as text.

        Raises:
            ImportError: the module named by ``"module:Class"`` cannot be imported.
            AttributeError: the module has no such class.
        """
        if not isinstance(self.policy, str):
            return self.policy
        module, _, attr = self.policy.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, AlgorithmSpec] = {}


def register_algorithm(
    name: str,
    *,
    config: type[AlgorithmConfig],
    policy: Any,
    doc: str | None = None,
    builtin: bool = False,
) -> AlgorithmSpec:
    """Make ``name`` usable as a worker set's ``policy.algo``.

    Args:
        name: the algorithm's name in plans (``"td3"``).
        config: its settings model: a subclass of ``AlgorithmConfig`` whose ``algo`` field
            is ``Literal[name]`` with default ``name``.
        policy: its learner: a subclass of ``plangraph.rl.policy.TorchPolicy`` whose
            ``config_type`` is ``config``, or ``"module:Class"`` text of one.
        doc: one line for ``plangraph ops``; default: the first paragraph of ``config``'s
            docstring, on one line.
        builtin: plangraph's own (listed in the committed plan schema).

    Registering a name again replaces the earlier entry (a module imported twice, a
    notebook cell run again), except that a built-in cannot be replaced.

    Raises:
        TypeError: ``config`` is not an ``AlgorithmConfig`` subclass.
        ValueError: an empty name, ``config.algo`` is not ``name``, ``policy`` text not
            ``"module:Class"``, or ``name`` is a built-in algorithm's.
    """
    if not name:
        raise ValueError("an algorithm name must not be empty")
    if not (isinstance(config, type) and issubclass(config, AlgorithmConfig)):
        raise TypeError(
            f"algorithm {name!r}: config must be a subclass of "
            f"plangraph.ops.policies.AlgorithmConfig, got {config!r}"
        )
    field = config.model_fields.get("algo")
    if field is None or field.default != name:
        raise ValueError(
            f"algorithm {name!r}: {config.__name__} must declare "
            f'`algo: Literal["{name}"] = "{name}"` (its algo field names the algorithm)'
        )
    if isinstance(policy, str):
        module, sep, attr = policy.partition(":")
        if not (module and sep and attr):
            raise ValueError(f"algorithm {name!r}: policy text must be 'module:Class'")
    old = _REGISTRY.get(name)
    if old is not None and old.builtin and not builtin:
        raise ValueError(f"{name!r} is a built-in algorithm; register yours under another name")
    # The docstring's first paragraph on one line (a summary may wrap over several lines).
    first = " ".join((config.__doc__ or "").strip().split("\n\n", 1)[0].split())
    spec = AlgorithmSpec(name, config, policy, doc or first, builtin)
    _REGISTRY[name] = spec
    return spec


def unregister_algorithm(name: str) -> None:
    """Forget a user algorithm (tests, notebooks).

    Raises:
        KeyError: ``name`` is not registered.
        ValueError: ``name`` is a built-in.
    """
    if _REGISTRY[name].builtin:
        raise ValueError(f"{name!r} is a built-in algorithm")
    del _REGISTRY[name]


def algorithms() -> dict[str, AlgorithmSpec]:
    """The registered algorithms by name, sorted."""
    return dict(sorted(_REGISTRY.items()))


def builtin_algorithms() -> list[AlgorithmSpec]:
    """plangraph's own algorithms, sorted by name."""
    return [s for s in algorithms().values() if s.builtin]


def algorithm(name: str) -> AlgorithmSpec:
    """The algorithm registered as ``name``.

    Raises:
        KeyError: no such algorithm (the message has a did-you-mean and the known names).
    """
    spec = _REGISTRY.get(name)
    if spec is None:
        near = close_matches(name, _REGISTRY)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise KeyError(
            f"unknown algorithm {name!r}{hint}; registered: {', '.join(sorted(_REGISTRY))}"
        )
    return spec


def as_policy_config(value: Any) -> AlgorithmConfig:
    """A policy config from a config model instance or a dict ``{"algo": ..., ...}``.

    Raises:
        pydantic.ValidationError: unknown ``algo`` (with a did-you-mean) or settings the
            algorithm's model refuses (each error located below the policy).
    """
    return _POLICY_ADAPTER.validate_python(value)


PolicyConfig = Annotated[
    AlgorithmConfig,
    OpenSettings(
        base=AlgorithmConfig,
        tag="algo",
        registry=_REGISTRY,
        field="a policy",
        noun="algorithm",
        codes=("policy_type", "unknown_algo"),
    ),
]
"""A field type for a policy config: any registered algorithm's settings model."""

_POLICY_ADAPTER: TypeAdapter[AlgorithmConfig] = TypeAdapter(PolicyConfig)
