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
about as much as the rest of the compiler, so the spaces of envs that only installed
packages define are cached on disk (``$PLANGRAPH_CACHE_DIR``, else
``$XDG_CACHE_HOME/plangraph``, else ``~/.cache/plangraph``; one file per installed
gymnasium, ``env_spaces-v<format>-<hash>.json``, so that virtual environments used in turn
keep their caches). A cache hit imports nothing; a cache that cannot be read or written is
ignored. What may be cached is decided so that a user's code can never be answered from it:

* Only while this process has not imported gymnasium. Registering an env (a module named
  with ``--import``, a Python plan) imports gymnasium, so when it is not imported yet the
  registry an env id would be looked up in is exactly what the installed packages
  declare. Once it is imported, an id may name a user's env, or a user's re-registration
  of a built-in id, and the env is created instead (gymnasium is loaded by then anyway).
* Only envs whose registered entry point is in gymnasium itself or in a namespace package
  plangraph imports for an id (``ale_py`` for ``ALE/...``, ``plangraph.ops.env_extras``);
  an env another installed package registers is created every time.
* Only inside plangraph's own wrappers (their builder in ``plangraph``); a user's wrapper
  (its builder module imported by name, possibly without gymnasium) is applied every time.
* Each entry records the stamp (path, size, modification time) of every module its
  spaces come from: gymnasium (the file's key), the namespace package, and each wrapper's
  builder module; an entry whose stamps differ from the installed files is not used. Its
  key holds each wrapper's params with their defaults filled in.

Within one process, spaces are also kept per registered ``EnvSpec`` object: registering
an id again (a new spec) creates the env again.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["EnvSpaces", "SpaceInfo", "describe_space", "env_spaces"]

_CACHE_VERSION = 2


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


def _stamp(module: str) -> str | None:
    """Identifies the installed file of ``module`` without importing it (its parent
    packages are imported): ``path:size:mtime_ns``; None when it is not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not os.path.isfile(spec.origin):
        return None
    st = os.stat(spec.origin)
    return f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}"


def _gymnasium_key() -> str | None:
    """Identifies the installed gymnasium without importing it (None: not installed)."""
    return _stamp("gymnasium")


def _cache_path(key: str) -> Path:
    """The cache file of the gymnasium that ``key`` identifies."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    # The format version in the name: plangraph checkouts of different formats sharing
    # one virtual environment keep a file each instead of overwriting each other's.
    return _cache_dir() / f"env_spaces-v{_CACHE_VERSION}-{digest}.json"


def _namespace_module(env_id: str) -> str | None:
    """The package plangraph imports to register ``env_id``'s namespace (``ale_py``)."""
    from plangraph.ops.env_extras import NAMESPACE_MODULES

    namespace, sep, _ = env_id.rpartition("/")
    return NAMESPACE_MODULES.get(namespace) if sep else None


@dataclass(frozen=True)
class _Entry:
    """Where a cacheable (env, wrappers) lives in the cache and what it depends on."""

    key: str  # the gymnasium's key: names the file
    name: str  # the entry in the file: env id and wrappers with their params
    depends: dict[str, str]  # module -> _stamp of the other modules the spaces come from

    @property
    def path(self) -> Path:
        return _cache_path(self.key)


def _cacheable(env_id: str, wrappers: tuple[Any, ...]) -> _Entry | None:
    """The cache entry of ``env_id`` inside ``wrappers``, or None when the disk cache must
    not answer (see the module docstring): gymnasium already imported here, a wrapper that
    is not plangraph's, or a module the spaces come from that is not installed."""
    if "gymnasium" in sys.modules:
        return None
    key = _gymnasium_key()
    if key is None:
        return None
    modules = []
    namespace = _namespace_module(env_id)
    if namespace is not None:
        modules.append(namespace)
    described = []
    for w in wrappers:
        builder = w.builder()
        module = builder.partition(":")[0]
        if module.split(".")[0] != "plangraph":
            return None
        modules.append(module)
        described.append({"builder": builder, "name": w.name, "params": w.validated_params()})
    depends = {m: _stamp(m) for m in sorted(set(modules))}
    if any(v is None for v in depends.values()):
        return None
    name = env_id + (" " + json.dumps(described, sort_keys=True) if described else "")
    return _Entry(key, name, {k: v for k, v in depends.items() if v is not None})


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


def _cached(env_id: str, entry: _Entry) -> EnvSpaces | None:
    found = _read_cache(entry.path, entry.key).get(entry.name)
    if not isinstance(found, dict) or found.get("depends") != entry.depends:
        return None
    try:
        return _from_dict(env_id, found)
    except (KeyError, TypeError, ValueError):
        return None


def _store(entry: _Entry, spaces: EnvSpaces) -> None:
    envs = _read_cache(entry.path, entry.key)
    envs[entry.name] = {
        "depends": entry.depends,
        "observation": asdict(spaces.observation),
        "action": asdict(spaces.action),
    }
    _write_cache(entry.path, entry.key, envs)


def _installed_entry_point(env_id: str, spec: Any) -> bool:
    """``spec`` (the gymnasium ``EnvSpec`` of ``env_id``) makes its env with code of
    gymnasium or of the package that registers ``env_id``'s namespace, nothing else."""
    point = spec.entry_point
    module = point.partition(":")[0] if isinstance(point, str) else getattr(point, "__module__", "")
    top = str(module).split(".")[0]
    namespace = _namespace_module(env_id)
    return top == "gymnasium" or (namespace is not None and top == namespace.split(".")[0])


_MADE: dict[tuple[str, str], tuple[Any, EnvSpaces | None]] = {}
"""(env id, wrappers' JSON) -> (the registry's ``EnvSpec`` then, its spaces)."""


def _create(env_id: str, specs: str) -> tuple[EnvSpaces | None, Any]:
    """The spaces of one env made from the registry, and the registry's ``EnvSpec`` of
    ``env_id`` (None when it is not registered)."""
    import gymnasium

    from plangraph.ops.env_extras import EnvDependencyError, register_env_namespace

    try:
        register_env_namespace(env_id)  # ALE/...: ale_py registers them when imported
    except EnvDependencyError:  # the build names the extra to install
        return None, None
    spec = gymnasium.registry.get(env_id)
    if spec is None:
        return None, None
    made = _MADE.get((env_id, specs))
    if made is not None and made[0] is spec:
        return made[1], spec
    found = None
    try:
        env = gymnasium.make(env_id)
        if specs:
            from plangraph.ops.wrappers import WrapperSpec, wrapped_env

            env = wrapped_env(env, [WrapperSpec.model_validate(w) for w in json.loads(specs)])
    except Exception:  # e.g. a missing optional dependency: the build reports it
        env = None
    if env is not None:
        try:
            found = EnvSpaces(
                env_id, describe_space(env.observation_space), describe_space(env.action_space)
            )
        finally:
            with contextlib.suppress(Exception):
                env.close()
    _MADE[(env_id, specs)] = (spec, found)
    return found, spec


def env_spaces(env_id: str, wrappers: tuple[Any, ...] = ()) -> EnvSpaces | None:
    """The spaces of the gymnasium env registered as ``env_id``, inside ``wrappers``
    (``plangraph.ops.wrappers.WrapperSpec``, applied in order).

    Returns:
        ``EnvSpaces``, or None when they cannot be known at compile time: a ``module:``
        prefixed id, an id gymnasium does not register, an env whose creation fails (a
        missing optional dependency), or no gymnasium installed.
    """
    if ":" in env_id:
        return None
    entry = _cacheable(env_id, tuple(wrappers))
    if entry is not None:
        hit = _cached(env_id, entry)
        if hit is not None:
            return hit
    if importlib.util.find_spec("gymnasium") is None:
        return None
    specs = json.dumps([w.model_dump(mode="json") for w in wrappers], sort_keys=True)
    found, spec = _create(env_id, specs if wrappers else "")
    if entry is not None and found is not None and _installed_entry_point(env_id, spec):
        _store(entry, found)
    return found
