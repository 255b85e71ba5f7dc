"""The observation and action spaces of a plan's env, read by creating one env.

The compiler needs them to refuse an algorithm that cannot act in the env (DQN on
``Box`` actions) before anything launches. It creates one gymnasium env by its
registered id (``gymnasium.make(env_id)``, then ``close()``), without Ray or torch, and
describes its spaces as plain data (:class:`SpaceInfo`).

Only ids in gymnasium's registry are created: an id with a ``module:`` prefix (the
module registers the env when imported) is not imported at compile time, so its spaces
are unknown and the checks that need them are skipped. The namespaces of plangraph's
optional extras (``ALE/...``, ``plangraph.ops.env_extras``) are registered first; an env
whose extra is missing has unknown spaces here, and the build names the extra to install.

Cache. ``plangraph validate`` must stay fast, and importing gymnasium (with numpy) costs
about as much as the rest of the compiler, so descriptions are cached in-process and on
disk (``$PLANGRAPH_CACHE_DIR``, else ``$XDG_CACHE_HOME/plangraph``, else
``~/.cache/plangraph``), keyed by the installed gymnasium (its path, size and
modification time, read without importing it): one file per gymnasium,
``env_spaces-<hash of the key>.json``, so that virtual environments used in turn keep
their caches instead of overwriting one another's. A cache hit imports nothing; a cache
that cannot be read or written is ignored.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["EnvSpaces", "SpaceInfo", "describe_space", "env_spaces"]

_CACHE_VERSION = 1


@dataclass(frozen=True)
class SpaceInfo:
    """What the checks need to know about one gymnasium space.

    ``kind``: the space class name (``"Box"``, ``"Discrete"``, ``"MultiDiscrete"``,
    ``"Dict"``, ...); ``text``: ``str(space)`` for messages; ``shape``: the space's shape
    (``()`` when it has none); ``dtype``: numpy dtype name or None; ``bounded``: every
    bound of a ``Box`` is finite (True for the other kinds).
    """

    kind: str
    text: str
    shape: tuple[int, ...]
    dtype: str | None
    bounded: bool = True


@dataclass(frozen=True)
class EnvSpaces:
    """The single-env ``observation`` and ``action`` spaces of env ``env``."""

    env: str
    observation: SpaceInfo
    action: SpaceInfo


def describe_space(space: Any) -> SpaceInfo:
    """A :class:`SpaceInfo` of a gymnasium space (duck-typed: gymnasium is not imported)."""
    kind = type(space).__name__
    shape = getattr(space, "shape", None)
    dtype = getattr(space, "dtype", None)
    bounded = True
    if kind == "Box":
        import numpy as np

        bounded = bool(np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high)))
    return SpaceInfo(
        kind=kind,
        text=" ".join(str(space).split()),
        shape=tuple(int(d) for d in shape) if shape is not None else (),
        dtype=str(dtype) if dtype is not None else None,
        bounded=bounded,
    )


def _cache_dir() -> Path:
    if os.environ.get("PLANGRAPH_CACHE_DIR"):
        return Path(os.environ["PLANGRAPH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "plangraph"


def _gymnasium_key() -> str | None:
    """Identifies the installed gymnasium without importing it (None: not installed)."""
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or spec.origin is None:
        return None
    st = os.stat(spec.origin)
    return f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}"


def _cache_path(key: str) -> Path:
    """The cache file of the gymnasium that ``key`` identifies."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return _cache_dir() / f"env_spaces-{digest}.json"


def _from_dict(env: str, data: dict[str, Any]) -> EnvSpaces:
    def info(d: dict[str, Any]) -> SpaceInfo:
        return SpaceInfo(
            kind=str(d["kind"]),
            text=str(d["text"]),
            shape=tuple(int(x) for x in d["shape"]),
            dtype=d["dtype"],
            bounded=bool(d["bounded"]),
        )

    return EnvSpaces(env, info(data["observation"]), info(data["action"]))


def _read_cache(path: Path, key: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
        return {}
    if data.get("gymnasium") != key or not isinstance(data.get("envs"), dict):
        return {}
    return data["envs"]


def _write_cache(path: Path, key: str, envs: dict[str, Any]) -> None:
    data = {"version": _CACHE_VERSION, "gymnasium": key, "envs": envs}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".env_spaces.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, path)  # atomic: a concurrent reader sees old or new, never half
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _create(env_id: str, specs: str) -> EnvSpaces | None:
    import gymnasium

    from plangraph.ops.env_extras import EnvDependencyError, register_env_namespace

    try:
        register_env_namespace(env_id)  # ALE/...: ale_py registers them when imported
    except EnvDependencyError:  # the build names the extra to install
        return None
    if env_id not in gymnasium.registry:
        return None
    try:
        env = gymnasium.make(env_id)
        if specs:
            from plangraph.ops.wrappers import WrapperSpec, wrapped_env

            env = wrapped_env(env, [WrapperSpec.model_validate(w) for w in json.loads(specs)])
    except Exception:  # e.g. a missing optional dependency: the build reports it
        return None
    try:
        return EnvSpaces(
            env_id, describe_space(env.observation_space), describe_space(env.action_space)
        )
    finally:
        with contextlib.suppress(Exception):
            env.close()


def env_spaces(env_id: str, wrappers: tuple[Any, ...] = ()) -> EnvSpaces | None:
    """The spaces of the gymnasium env registered as ``env_id``, inside ``wrappers``
    (``plangraph.ops.wrappers.WrapperSpec``, applied in order).

    Returns:
        ``EnvSpaces``, or None when they cannot be known at compile time: a ``module:``
        prefixed id, an id gymnasium does not register, an env whose creation fails (a
        missing optional dependency), or no gymnasium installed.
    """
    specs = json.dumps([w.model_dump(mode="json") for w in wrappers], sort_keys=True)
    return _env_spaces(env_id, specs if wrappers else "")


@functools.lru_cache(maxsize=64)
def _env_spaces(env_id: str, specs: str) -> EnvSpaces | None:
    """``env_spaces`` by hashable arguments: ``specs`` is the wrappers' JSON ("" for none)."""
    if ":" in env_id:
        return None
    key = _gymnasium_key()
    if key is None:
        return None
    path = _cache_path(key)
    cached = _read_cache(path, key)
    name = f"{env_id} {specs}" if specs else env_id  # a wrapped env: cached by its wrappers
    if name in cached:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return _from_dict(env_id, cached[name])
    found = _create(env_id, specs)
    if found is not None:
        entry = {"observation": asdict(found.observation), "action": asdict(found.action)}
        _write_cache(path, key, {**_read_cache(path, key), name: entry})
    return found
