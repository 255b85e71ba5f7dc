"""plangraph: distributed RL training loops as declared, compiled, drawable dataflow.

Importing this package is cheap: it pulls in neither ray nor torch. Those load only when a
compiled plan is built (``plangraph.build``) or the ``run`` command starts. The names
below load on first use.

* ``plangraph.Plan``: the plan IR (``plangraph.ir``); ``plangraph.PlanConfig``: config
  defaults whose attributes are ``${key}`` references, for Python plans.
* ``plangraph.analyze(plan, config=None)``: check a plan; always returns a
  ``CompiledPlan`` with ``.diagnostics``.
* ``plangraph.compile(plan, config=None)``: the same, raising ``PlanValidationError``
  unless the plan is clean.
* ``plangraph.build(compiled, env=None, num_workers=None, seed=0, address=None, ...)``: the
  compiled plan lowered onto Ray actors, an ``Algorithm`` (``plangraph.runtime.build``;
  this is where ray and torch load).
* ``plangraph.render(compiled, path, rankdir="TB")``: the plan drawn to ``path`` (``.dot``,
  ``.gv``, ``.svg``, ``.png``); ``plangraph.to_dot(compiled)``: its DOT text
  (``plangraph.diagram``). In Jupyter, ``IPython.display.SVG(filename=str(
  plangraph.render(compiled, "plan.svg")))`` shows it.
* ``plangraph.load_policy(checkpoint)``: the trained policy of a checkpoint (or a run
  directory's newest), usable without Ray: ``.compute_actions(obs)``, ``.evaluate()``.
* Extending: ``plangraph.register_algorithm(name, config=..., policy=...)`` and
  ``plangraph.register_model(name, config=..., build=...)`` (``plangraph.ops``), with the
  bases ``AlgorithmConfig``, ``ActorCriticConfig`` and ``ModelSettings``; a learner
  subclasses ``plangraph.rl.TorchPolicy`` (``docs/extending.md``).
* Errors: ``PlangraphError`` and one subclass per phase (``PlanError`` with
  ``PlanValidationError`` and ``PlanBuildError``, ``BuildError``, ``RegistrationError``
  with ``UnknownOperatorError``, ``RenderError``, ``OperatorError``,
  ``StopCriterionError``, ``CheckpointError``), and ``WaitTimeoutError`` (also a
  ``TimeoutError``) for a wait that outlived its deadline; the tree is drawn in
  ``plangraph.errors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plangraph.version import __version__ as __version__

__all__ = [
    "ActorCriticConfig",
    "AlgorithmConfig",
    "BuildError",
    "CheckpointError",
    "CompiledPlan",
    "ModelSettings",
    "OperatorError",
    "Plan",
    "PlanBuildError",
    "PlanConfig",
    "PlanError",
    "PlanValidationError",
    "PlangraphError",
    "RegistrationError",
    "RenderError",
    "StopCriterionError",
    "UnknownOperatorError",
    "WaitTimeoutError",
    "analyze",
    "build",
    "compile",
    "load_plan",
    "load_policy",
    "register_algorithm",
    "register_model",
    "render",
    "to_dot",
]

_LAZY = {
    "ActorCriticConfig": "plangraph.ops",
    "AlgorithmConfig": "plangraph.ops",
    "ModelSettings": "plangraph.ops",
    "register_algorithm": "plangraph.ops",
    "register_model": "plangraph.ops",
    "Plan": "plangraph.ir",
    "PlanConfig": "plangraph.ir",
    "CompiledPlan": "plangraph.compiler",
    "PlanValidationError": "plangraph.compiler",
    "analyze": "plangraph.compiler",
    "compile": "plangraph.compiler",
    "load_plan": "plangraph.compiler",
    "load_policy": "plangraph.runtime.trained_policy",
    "build": "plangraph.runtime",
    "render": "plangraph.diagram",
    "to_dot": "plangraph.diagram",
    "PlangraphError": "plangraph.errors",
    "PlanError": "plangraph.errors",
    "BuildError": "plangraph.errors",
    "RenderError": "plangraph.errors",
    "StopCriterionError": "plangraph.errors",
    "RegistrationError": "plangraph.errors",
    "UnknownOperatorError": "plangraph.errors",
    "CheckpointError": "plangraph.errors",
    "WaitTimeoutError": "plangraph.errors",
    "PlanBuildError": "plangraph.ops.builder",
    "OperatorError": "plangraph.flow.errors",
}

if TYPE_CHECKING:
    from plangraph.compiler import (
        CompiledPlan,
        PlanValidationError,
        analyze,
        compile,
        load_plan,
    )
    from plangraph.diagram import render, to_dot
    from plangraph.errors import (
        BuildError,
        CheckpointError,
        PlanError,
        PlangraphError,
        RegistrationError,
        RenderError,
        StopCriterionError,
        UnknownOperatorError,
        WaitTimeoutError,
    )
    from plangraph.flow.errors import OperatorError
    from plangraph.ir import Plan, PlanConfig
    from plangraph.ops import (
        ActorCriticConfig,
        AlgorithmConfig,
        ModelSettings,
        register_algorithm,
        register_model,
    )
    from plangraph.ops.builder import PlanBuildError
    from plangraph.runtime import build
    from plangraph.runtime.trained_policy import load_policy


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'plangraph' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
