"""Own environments: resolving an env id or creator in the driver so that it travels.

A user registers an env the way gymnasium users do, ``gymnasium.register(id, entry_point=
MyEnv)``, in a Python plan file or in a module named with ``--import``; or passes a
creator from Python, ``plangraph.build(compiled, env=lambda: MyEnv())``. Only the driver
ran that registration: a rollout worker is another process (on a cluster, another
machine) whose gymnasium registry knows none of it. So the driver resolves the env once
(:func:`resolve_env`) into a self-contained creator, :class:`GymEnvCreator`: the
registered ``EnvSpec`` with its entry point replaced by the class or function it names.
Ray pickles that creator (cloudpickle) into each worker's constructor; the worker calls
it, never its own registry.

What cloudpickle sends by value, so that nothing has to be installed on a cluster's nodes
(:func:`ship_by_value`): classes and functions defined in a Python plan file (its module
is not importable anywhere, so cloudpickle already pickles them by value), in ``__main__``,
and in any module that is not installed in the interpreter's site-packages (a local
``my_envs.py``, a test module): that module's top-level package is registered with
``cloudpickle.register_pickle_by_value``. Installed packages (gymnasium's own envs, a
pip-installed env package) and plangraph itself travel by reference and must be installed
on every node, as plangraph must be anyway.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import site
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec, load_env_creator

__all__ = [
    "EnvLike",
    "GymEnvCreator",
    "env_label",
    "is_local_module",
    "resolve_env",
    "ship_by_value",
    "ship_code",
]

EnvLike = str | Callable[..., gym.Env]
"""A gymnasium env id (``"CartPole-v1"``, ``"my_module:MyEnv-v0"``) or a creator:
a callable returning a ``gym.Env`` (called with no arguments by the rollout workers)."""

# Installed on every node of a plangraph cluster, so always sent by reference.
_BY_REFERENCE = frozenset({"plangraph", "gymnasium", "numpy", "torch", "ray"})


@dataclasses.dataclass(frozen=True)
class GymEnvCreator:
    """``gym.make(spec, **kwargs)`` for a registered env whose entry point is resolved.

    Picklable wherever the entry point is (see the module docstring); ``kwargs`` such as
    ``render_mode="rgb_array"`` pass through to ``gym.make``.
    """

    spec: EnvSpec

    @property
    def id(self) -> str:
        return str(self.spec.id)

    def __call__(self, **kwargs: Any) -> gym.Env:
        return gym.make(self.spec, **kwargs)


def resolve_env(env: EnvLike) -> Callable[..., gym.Env]:
    """The self-contained creator of ``env``, resolved in this (the driver's) process.

    ``"module:EnvId"`` imports ``module`` first (as ``gymnasium.make`` does); a string
    entry point (``"pkg.mod:Class"``) is imported and replaced by the object it names. A
    callable is returned as it is.

    Raises:
        ImportError: the module of ``"module:EnvId"`` or of the entry point cannot be
            imported.
        gymnasium.error.Error: ``env`` names no registered env (the message lists close
            ids).
        TypeError: ``env`` is neither a string nor callable.
    """
    if callable(env):
        return env
    if not isinstance(env, str):
        raise TypeError(f"env must be a gymnasium env id or a creator callable, got {env!r}")
    module, _, env_id = env.rpartition(":")
    if module:
        importlib.import_module(module)
    spec = gym.spec(env_id)
    entry = spec.entry_point
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    # gymnasium types load_env_creator for env and vector entry points alike; an EnvSpec's
    # entry point names an env creator
    return GymEnvCreator(dataclasses.replace(spec, entry_point=creator))  # type: ignore[arg-type]


def env_label(env: EnvLike | None) -> str | None:
    """A short name for ``env`` (for messages and run names): the id, or the creator's
    ``__name__``."""
    if env is None or isinstance(env, str):
        return env
    if isinstance(env, GymEnvCreator):
        return env.id
    base = getattr(env, "base", None)  # plangraph.rl.wrappers.WrappedEnvCreator
    if base is not None:
        return env_label(base)
    return str(getattr(env, "__name__", type(env).__name__))


def _installed_dirs() -> tuple[str, ...]:
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(site.getsitepackages())
    dirs.add(site.getusersitepackages())
    return tuple(os.path.realpath(d) + os.sep for d in sorted(dirs) if d)


def is_local_module(module_name: str) -> bool:
    """True for a module that a cluster node would not have: loaded from a file outside
    the interpreter's stdlib and site-packages."""
    top = module_name.partition(".")[0]
    if top in _BY_REFERENCE or top in sys.builtin_module_names:
        return False
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if module is None or not file:
        return False  # not importable here: cloudpickle already sends it by value
    return not os.path.realpath(file).startswith(_installed_dirs())


def ship_by_value(env: Callable[..., Any]) -> str | None:
    """Make Ray's cloudpickle send ``env``'s code by value when it comes from a local
    module (see the module docstring); returns the package registered, or ``None``.

    Registration is process-wide and idempotent: later pickles of that package's objects
    (by this driver) are by value too.
    """
    base = getattr(env, "base", None)  # plangraph.rl.wrappers.WrappedEnvCreator
    if base is not None:
        return None if isinstance(base, str) else ship_by_value(base)
    target: Any = env.spec.entry_point if isinstance(env, GymEnvCreator) else env
    return ship_code(target)


def ship_code(target: Any) -> str | None:
    """Make Ray's cloudpickle send ``target`` (a class, a function, an object) by value
    when its module is local (see the module docstring); returns the package registered,
    or ``None`` (an installed module: every node imports it by reference)."""
    module_name = getattr(target, "__module__", None) or type(target).__module__
    if not module_name or module_name == "__main__" or not is_local_module(module_name):
        return None
    from ray import cloudpickle

    top = module_name.partition(".")[0]
    package = sys.modules.get(top)
    if package is None or not is_local_module(top):
        package, top = sys.modules[module_name], module_name
    if top not in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.register_pickle_by_value(package)
    return top
