"""Envs from optional extras: registering them, and saying which extra a missing one needs.

Two families of standard benchmarks need packages plangraph does not install by default:

* ``atari``: the Arcade Learning Environment (``ale-py``, whose ROMs ship in the package)
  registers the ``ALE/...`` env ids (``ALE/Pong-v5``) when ``ale_py`` is imported, and the
  ``atari_preprocessing`` wrapper resizes frames with OpenCV (``cv2``);
* ``mujoco``: gymnasium registers its MuJoCo envs (``HalfCheetah-v5``, ``Hopper-v5``, ...)
  itself, but creating one imports the ``mujoco`` package.

``pip install 'plangraph[atari,mujoco]'`` (or ``tools/bootstrap``) installs both.
:func:`register_env_namespace` imports the module that registers an id's namespace (so
``gymnasium.make("ALE/Pong-v5")`` works in every process that calls it: the compiler, the
driver and each rollout worker), and :func:`missing_dependency` turns the ``ImportError``
of an env that cannot be created into a message naming the extra to install. This module
imports neither gymnasium nor the extras until asked.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from dataclasses import dataclass

__all__ = [
    "BUILTIN_ENVS",
    "EXTRAS",
    "NAMESPACE_MODULES",
    "EnvDependencyError",
    "Extra",
    "missing_dependency",
    "register_env_namespace",
    "route_mujoco_warnings",
]


@dataclass(frozen=True)
class Extra:
    """An optional extra of the ``plangraph`` package: its ``name`` (``pip install
    'plangraph[name]'``), the Python ``modules`` it provides and what it is ``for``."""

    name: str
    modules: tuple[str, ...]
    for_envs: str

    @property
    def install(self) -> str:
        return f"pip install 'plangraph[{self.name}]'"


EXTRAS: dict[str, Extra] = {
    "atari": Extra("atari", ("ale_py", "cv2"), "the Atari envs (ALE/Pong-v5, ...)"),
    "mujoco": Extra("mujoco", ("mujoco",), "gymnasium's MuJoCo envs (HalfCheetah-v5, ...)"),
}
"""The extras that bring envs, by name."""

NAMESPACE_MODULES: dict[str, str] = {"ALE": "ale_py"}
"""Env id namespace (``"ALE"`` of ``"ALE/Pong-v5"``) -> the module whose import registers
its envs with gymnasium."""


class EnvDependencyError(ImportError):
    """An env cannot be created because a package it needs is not installed; the message
    names the env, the missing module and the ``pip install`` to run."""


def _extra_of(module: str) -> Extra | None:
    top = module.split(".")[0]
    return next((e for e in EXTRAS.values() if top in e.modules), None)


def _message(env_id: str, module: str) -> str:
    extra = _extra_of(module)
    if extra is not None:
        return (
            f"env {env_id!r} needs the Python module {module!r}, which is not installed: it "
            f"comes with plangraph's {extra.name!r} extra ({extra.for_envs}); run "
            f"{extra.install} (tools/bootstrap installs it)"
        )
    return (
        f"env {env_id!r} needs the Python module {module!r}, which is not installed; install "
        "the package that provides it, here and wherever the rollout workers run"
    )


BUILTIN_ENVS: dict[str, tuple[str, int]] = {
    "StatelessCartPole": ("plangraph.rl.stateless_cartpole:StatelessCartPole", 500),
    "Navigation2D": ("plangraph.rl.navigation2d:Navigation2D", 100),
}
"""plangraph's own gymnasium envs: id -> (entry point, ``max_episode_steps``), registered
with gymnasium by :func:`register_env_namespace` (``StatelessCartPole``: CartPole-v1
without its two velocities, ``plangraph.rl.stateless_cartpole``; ``Navigation2D``: MAML's
2D point navigation task family, ``plangraph.rl.navigation2d``)."""


def register_env_namespace(env_id: str) -> None:
    """Register ``env_id`` with gymnasium if it is one of plangraph's own envs
    (``BUILTIN_ENVS``); import the module that registers ``env_id``'s namespace with
    gymnasium, if it is one plangraph knows (``NAMESPACE_MODULES``), and
    :func:`route_mujoco_warnings`; call it before ``gymnasium.make(env_id)``.

    Raises:
        EnvDependencyError: that module is not installed (the message names the extra).
    """
    builtin = BUILTIN_ENVS.get(env_id)
    if builtin is not None:
        gymnasium = importlib.import_module("gymnasium")
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=builtin[0], max_episode_steps=builtin[1])
    namespace, sep, _ = env_id.rpartition("/")
    module = NAMESPACE_MODULES.get(namespace.rpartition(":")[2]) if sep else None
    if module is not None:
        try:
            imported = importlib.import_module(module)
        except ImportError as exc:
            raise EnvDependencyError(_message(env_id, module)) from exc
        if module == "ale_py":
            # errors only: not the emulator's banner on stderr for every env it makes
            # (each rollout worker's sub-envs, and `plangraph validate`)
            imported.ALEInterface.setLoggerMode(imported.LoggerMode.Error)
    route_mujoco_warnings(env_id)


def _warn(message: str) -> None:
    warnings.warn(f"mujoco: {message}", RuntimeWarning, stacklevel=2)


def route_mujoco_warnings(env_id: str) -> None:
    """Before a MuJoCo env is created: send MuJoCo's warnings (deprecated XML attributes of
    gymnasium's models) to Python's ``warnings`` instead of MuJoCo's default, which also
    appends them to a ``MUJOCO_LOG.TXT`` in the current directory. Nothing for other envs,
    nor without gymnasium or mujoco installed (the creation then names the missing extra)."""
    gymnasium = sys.modules.get("gymnasium")
    spec = gymnasium.registry.get(env_id) if gymnasium is not None else None
    entry = spec.entry_point if spec is not None else None
    if not (isinstance(entry, str) and entry.startswith("gymnasium.envs.mujoco")):
        return
    try:
        mujoco = importlib.import_module("mujoco")
    except ImportError:
        return
    if mujoco.get_mju_user_warning() is not _warn:
        mujoco.set_mju_user_warning(_warn)


def missing_dependency(env_id: str, exc: BaseException) -> str | None:
    """The message for an env whose creation raised ``exc`` because a module is missing
    (a ``ModuleNotFoundError`` in ``exc``'s cause or context chain, as gymnasium's
    ``DependencyNotInstalled`` carries it), else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, EnvDependencyError):
            return str(cur)
        if isinstance(cur, ModuleNotFoundError) and cur.name:
            return _message(env_id, cur.name)
        cur = cur.__cause__ or cur.__context__
    return None
