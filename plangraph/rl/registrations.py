"""A user's algorithms, model types and wrappers, carried to the processes that act.

The algorithm, model and wrapper registries (``plangraph.ops.algorithms``,
``plangraph.ops.models``, ``plangraph.ops.wrappers``) live in each process. A user
registers in the driver (a Python plan, a module named with ``--import``); a rollout
worker is another process that never imported that module. So a worker set hands each
worker it starts the user's registrations (:func:`user_registrations`), and the worker
installs them before it makes its envs and builds its policy. Their classes and
functions travel by value when they come from a local module
(``plangraph.rl.envs.ship_code``), so a worker needs neither the module on its path nor
a cluster node to have it installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plangraph.ops.algorithms import AlgorithmSpec, algorithms, register_algorithm
from plangraph.ops.models import ModelSpec, model_types, register_model
from plangraph.ops.wrappers import WrapperKind, all_wrappers, register_wrapper
from plangraph.rl.envs import ship_code

__all__ = ["Registrations", "user_registrations"]


@dataclass(frozen=True)
class Registrations:
    """The non-built-in entries of the algorithm, model and wrapper registries."""

    algorithms: tuple[AlgorithmSpec, ...] = ()
    models: tuple[ModelSpec, ...] = ()
    wrappers: tuple[WrapperKind, ...] = ()

    def install(self) -> None:
        """Register every entry in this process (replacing same-named user entries)."""
        for spec in self.algorithms:
            register_algorithm(spec.name, config=spec.config, policy=spec.policy, doc=spec.doc)
        for model in self.models:
            register_model(model.name, config=model.config, build=model.build)
        for kind in self.wrappers:
            register_wrapper(kind)

    def code(self) -> list[Any]:
        """The classes and functions the entries hold (not the ``"module:attr"`` texts)."""
        out: list[Any] = []
        for spec in self.algorithms:
            out += [spec.config, spec.policy]
        for model in self.models:
            out += [model.config, model.build]
        for kind in self.wrappers:
            out += [kind.params, kind.builder]
        return [c for c in out if not isinstance(c, str)]


def user_registrations() -> Registrations:
    """This process's user algorithms and model types, their code marked to travel by
    value where it comes from a local module (``ship_code``)."""
    regs = Registrations(
        tuple(s for s in algorithms().values() if not s.builtin),
        tuple(m for m in model_types().values() if not m.builtin),
        tuple(k for k in all_wrappers().values() if not k.builtin),
    )
    for obj in regs.code():
        ship_code(obj)
    return regs
