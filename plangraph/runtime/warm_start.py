"""The driver's own start-up work, done in a thread while Ray's head node comes up.

Ray's head node takes seconds to come up (``plangraph.runtime.local_head``). The learner
needs none of it to be built, only torch (1-3 s of CPU to import) and the observation and
action spaces of its env. ``Warmup`` imports the first and reads the second from one env
created (and closed) here, so that when Ray is up the learner is built at once and the
rollout workers get its weights without the driver waiting for a worker to answer. Every
background import of the driver goes through one thread (``import_in_background``).

Spaces are read here only where the env is known to be creatable in this process: not
when joining a cluster (``address``), whose workers may have what the driver lacks; then
``WorkerSet`` asks its first worker, as before.
"""

from __future__ import annotations

import importlib
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from plangraph.errors import BuildError
from plangraph.startup_trace import mark

_imports: queue.SimpleQueue[tuple[str, threading.Event, list[BaseException]]] = queue.SimpleQueue()
_importer: threading.Thread | None = None
_importer_lock = threading.Lock()


def _import_forever() -> None:
    while True:
        module, done, errors = _imports.get()
        try:
            importlib.import_module(module)
        except BaseException as exc:  # handed to whoever waits for this module
            errors.append(exc)
        finally:
            done.set()


def import_in_background(module: str) -> Callable[[], None]:
    """Import ``module`` in this process's one import thread, after the modules asked for
    before it; returns at once a function that waits for that import and re-raises its
    error. One thread for all of them, because two threads importing torch at the same
    time can each see the other's half-initialised modules (``AttributeError: partially
    initialized module 'torch'``)."""
    global _importer
    done, errors = threading.Event(), []
    _imports.put((module, done, errors))
    with _importer_lock:
        if _importer is None:
            _importer = threading.Thread(
                target=_import_forever, name="plangraph-imports", daemon=True
            )
            _importer.start()

    def wait() -> None:
        done.wait()
        if errors:
            raise errors[0]

    return wait


class Warmup:
    """Imports the learner's libraries and reads env spaces in a daemon thread.

    Args:
        worker_sets: ``WorkerSetParams`` by resource id (overrides applied).
        envs: each worker set's env as the workers get it (``resolve_worker_env``: a
            creator), by resource id; a worker set missing here uses ``params.env``.
        read_spaces: read each worker set's spaces from an env made here (False when
            joining a cluster).
    """

    def __init__(
        self,
        worker_sets: Mapping[str, Any],
        *,
        read_spaces: bool,
        envs: Mapping[str, Any] | None = None,
    ) -> None:
        self._worker_sets = dict(worker_sets)
        self._envs = dict(envs or {})
        self._read_spaces = read_spaces
        self._spaces: dict[str, tuple[Any, Any]] = {}
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="plangraph-warmup", daemon=True)

    def start(self) -> Warmup:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            # torch, then policies and models
            import_in_background("plangraph.rl.worker_set")()

            if self._read_spaces:
                self._spaces = self._env_spaces()
            mark("warmup_done")
        except BaseException as exc:  # re-raised in the caller's thread by join()
            self._error = exc

    def _env_spaces(self) -> dict[str, tuple[Any, Any]]:
        from plangraph.rl.row_layout import env_spaces

        by_env: dict[Any, tuple[Any, Any]] = {}
        out = {}
        for rid, params in sorted(self._worker_sets.items()):
            if params.num_workers == 0:
                continue  # the in-process worker makes its envs itself
            spec = self._envs.get(rid, params.env)
            # Keyed by the env the workers get (wrappers included), not by the id alone.
            key = id(spec) if callable(spec) else spec
            if key not in by_env:
                try:
                    by_env[key] = env_spaces(spec)
                except Exception as exc:
                    raise BuildError(
                        f"resource {rid!r}: env {params.env!r} could not be created "
                        f"({type(exc).__name__}: {exc})"
                    ) from exc
            out[rid] = by_env[key]
        return out

    def spaces(self, rid: str) -> tuple[Any, Any] | None:
        """``join()[rid]``, or None where the spaces were not read here."""
        return self.join().get(rid)

    def join(self) -> dict[str, tuple[Any, Any]]:
        """Wait for the thread; the ``(observation space, action space)`` read for each
        worker set with remote workers (none when not ``read_spaces``).

        Raises:
            BuildError: an env could not be created in this process.
            Exception: whatever importing torch raised.
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._spaces
