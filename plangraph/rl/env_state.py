"""Data-only snapshots of a gymnasium env's dynamic state, restored by assignment.

Gymnasium has no generic way to serialise an env. What a classic-control env (CartPole,
Acrobot, MountainCar, Pendulum) and gymnasium's common wrappers (``TimeLimit``,
``OrderEnforcing``, ``PassiveEnvChecker``) carry between steps is plain data in their
instance attributes: numpy arrays (the physical state), numbers and flags (elapsed steps,
``steps_beyond_terminated``, checker flags) and ``np.random.Generator`` objects (the env's
``np_random``). ``capture_env`` walks the wrapper chain (``env``, ``env.env``, ... down to
``unwrapped``) and records every such attribute; ``restore_env`` assigns them back onto an
env built the same way. For those envs the restored env continues bit for bit.

Attributes that cannot change while an env runs are skipped: spaces, ``EnvSpec``, the
wrapped env itself (the walk visits it), ``_saved_kwargs`` (gymnasium's record of the
constructor arguments) and plain functions. Anything else that is not data (a pygame
surface once rendering started, a MuJoCo ``MjData``, a physics engine handle, an old
``RandomState``) makes the env *uncapturable*: ``capture_env`` returns ``None`` and the
reason, and the caller falls back to a documented reset policy (``RolloutWorker``).

Snapshot layout (a plain data tree: dicts with str keys, lists, str/int/float/bool/None,
numpy arrays; no tuples, no objects)::

    {"layers": [{"class": "TimeLimit", "attrs": {name: value}}, ...]}   # outermost first

where each ``value`` is tagged: ``{"t": "py", "v": x}`` (None/bool/int/float/str),
``{"t": "array", "v": ndarray}``, ``{"t": "scalar", "v": 0-d ndarray}`` (a numpy scalar,
dtype kept), ``{"t": "rng", "v": bit_generator.state}``, ``{"t": "list"|"tuple", "v": [...]}``
or ``{"t": "dict", "v": {str: value}}``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["capture_env", "restore_env"]

_STATIC_ATTRS = frozenset({"_saved_kwargs", "env"})
_STATIC_TYPES: tuple[type, ...] = (
    gym.Space,
    gym.Env,
    gym.envs.registration.EnvSpec,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    functools.partial,
)
# Bit generators a snapshot may name (looked up by name on restore, nothing else).
_BIT_GENERATORS = frozenset({"PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"})


class _Uncapturable(Exception):
    """Internal: an attribute holds something that is not data."""


def _layers(env: gym.Env[Any, Any]) -> list[Any]:
    layers = [env]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def _encode(value: Any, where: str) -> dict[str, Any]:
    if value is None or isinstance(value, bool | int | float | str):
        return {"t": "py", "v": value}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise _Uncapturable(f"{where} is an object array")
        return {"t": "array", "v": value.copy()}
    if isinstance(value, np.generic):
        return {"t": "scalar", "v": np.asarray(value).copy()}
    if isinstance(value, np.random.Generator):
        state = value.bit_generator.state
        if state.get("bit_generator") not in _BIT_GENERATORS:
            raise _Uncapturable(f"{where} uses bit generator {state.get('bit_generator')!r}")
        return {"t": "rng", "v": state}
    if isinstance(value, list | tuple):
        kind = "list" if isinstance(value, list) else "tuple"
        return {"t": kind, "v": [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _Uncapturable(f"{where} is a dict with non-str keys")
        return {"t": "dict", "v": {k: _encode(v, f"{where}[{k!r}]") for k, v in value.items()}}
    raise _Uncapturable(f"{where} is a {type(value).__module__}.{type(value).__qualname__}")


def _decode(tagged: Mapping[str, Any]) -> Any:
    kind, value = tagged["t"], tagged["v"]
    if kind == "py":
        return value
    if kind == "array":
        return np.array(value, copy=True)
    if kind == "scalar":
        return np.asarray(value)[()]
    if kind == "rng":
        name = value["bit_generator"]
        if name not in _BIT_GENERATORS:
            raise ValueError(f"env snapshot names an unknown bit generator {name!r}")
        bit_generator = getattr(np.random, name)()
        bit_generator.state = value
        return np.random.Generator(bit_generator)
    if kind == "list":
        return [_decode(v) for v in value]
    if kind == "tuple":
        return tuple(_decode(v) for v in value)
    if kind == "dict":
        return {k: _decode(v) for k, v in value.items()}
    raise ValueError(f"env snapshot has an unknown value tag {kind!r}")


def capture_env(env: gym.Env[Any, Any]) -> tuple[dict[str, Any] | None, str]:
    """Snapshot ``env``'s wrapper chain: ``(snapshot, "")``, or ``(None, reason)`` when an
    attribute is not data (the reason names the layer and attribute)."""
    layers = []
    for layer in _layers(env):
        cls = type(layer).__qualname__
        attrs = {}
        for name, value in vars(layer).items():
            if name in _STATIC_ATTRS or isinstance(value, _STATIC_TYPES):
                continue
            try:
                attrs[name] = _encode(value, f"{cls}.{name}")
            except _Uncapturable as exc:
                return None, str(exc)
        layers.append({"class": cls, "attrs": attrs})
    return {"layers": layers}, ""


def restore_env(env: gym.Env[Any, Any], snapshot: Mapping[str, Any]) -> None:
    """Assign ``capture_env`` output back onto ``env``, an env built the same way.

    Raises:
        ValueError: ``env``'s wrapper chain differs from the snapshot's (other classes or
            another depth), or the snapshot is malformed.
    """
    layers = _layers(env)
    saved = list(snapshot["layers"])
    classes = [type(layer).__qualname__ for layer in layers]
    saved_classes = [entry["class"] for entry in saved]
    if classes != saved_classes:
        raise ValueError(
            f"env snapshot is of the wrapper chain {saved_classes}, this env is {classes}; "
            "restore into an env built from the same env id or creator"
        )
    for layer, entry in zip(layers, saved, strict=True):
        for name, tagged in entry["attrs"].items():
            setattr(layer, name, _decode(tagged))
