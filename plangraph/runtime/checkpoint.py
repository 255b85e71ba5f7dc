"""The data-only state format of checkpoints: JSON plus a numpy ``.npz``, never a pickle.

A *state tree* is what ``get_state()`` methods return: nested ``dict``/``list``/``tuple``
of ``str``, ``int`` (any size), ``float``, ``bool`` and ``None``, with numpy arrays, numpy
scalars and torch tensors as leaves. ``write_state(dir, tree)`` stores it as two files:

- ``state.json``: ``{"format": "plangraph-state", "version": 1, "arrays_sha256": ...,
  "tree": ...}``, strict JSON (no NaN literals). Plain values are themselves; what JSON
  cannot say is a one-key object with a ``$`` tag:
  ``{"$array": "a3"}`` (numpy array ``a3`` of the npz), ``{"$tensor": "a4"}`` (a CPU torch
  tensor, stored as its numpy array), ``{"$scalar": "a5"}`` (a numpy scalar, as a 0-d
  array, so its dtype and bits survive), ``{"$tuple": [...]}``, ``{"$float": "nan" |
  "inf" | "-inf"}``, and ``{"$dict": [[key, value], ...]}`` for a dict with a key that is
  not a string or that starts with ``$`` (int keys such as torch's optimizer state).
- ``arrays.npz``: the arrays, read with ``numpy.load(allow_pickle=False)``; an array of
  Python objects can be neither written nor read.

``read_state(dir)`` returns a tree equal to the one written (same types, dtypes, shapes
and bits; ``str``/``int``/``float`` subclasses come back as their base type). It never
unpickles and never imports or calls anything a file names: a corrupt, truncated or
hand-edited file, an npz that is not the one ``state.json`` was written with (its SHA-256
is checked), or an old ``state.pkl`` checkpoint raises :class:`CheckpointError`.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from plangraph.errors import CheckpointError

__all__ = [
    "ARRAYS_FILE",
    "LEGACY_STATE_FILE",
    "STATE_FILE",
    "read_state",
    "write_state",
]

STATE_FILE = "state.json"
ARRAYS_FILE = "arrays.npz"
LEGACY_STATE_FILE = "state.pkl"
FORMAT = "plangraph-state"
FORMAT_VERSION = 1

_ARRAY_TAGS = ("$array", "$tensor", "$scalar")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# Trees are a few levels deep (policies/<id>/optimizer/state/<i>/exp_avg); a bound keeps a
# hostile file from exhausting the stack instead of getting a clear error.
_MAX_DEPTH = 64


def _is_tensor(x: Any) -> bool:
    # torch is only consulted when it is already loaded: without it there are no tensors.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


class _Encoder:
    """One tree -> (JSON value, arrays by name); ``path`` names the place of an error."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def _array(self, tag: str, arr: np.ndarray, path: str) -> dict[str, str]:
        if arr.dtype.hasobject:
            raise CheckpointError(
                f"state {path or '/'}: an array of dtype {arr.dtype} holds Python objects, "
                "which a data-only checkpoint cannot store; use a numeric or string dtype"
            )
        name = f"a{len(self.arrays)}"
        self.arrays[name] = arr
        return {tag: name}

    def encode(self, x: Any, path: str = "") -> Any:
        # numpy first: np.float64 is also a float, and must come back as np.float64.
        if isinstance(x, np.ndarray):
            return self._array("$array", np.asarray(x), path)
        if isinstance(x, np.generic):
            return self._array("$scalar", np.asarray(x), path)
        if x is None or isinstance(x, (bool, str)):
            return x if type(x) in (bool, str, type(None)) else str(x)
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            x = float(x)
            if math.isfinite(x):
                return x
            return {"$float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
        if _is_tensor(x):
            try:
                arr = x.detach().cpu().numpy().copy()
            except (RuntimeError, TypeError) as exc:  # e.g. bfloat16 has no numpy dtype
                raise CheckpointError(
                    f"state {path or '/'}: torch tensor of dtype {x.dtype} has no numpy "
                    f"equivalent ({exc})"
                ) from exc
            return self._array("$tensor", arr, path)
        if isinstance(x, tuple):
            return {"$tuple": [self.encode(v, f"{path}/{i}") for i, v in enumerate(x)]}
        if isinstance(x, list):
            return [self.encode(v, f"{path}/{i}") for i, v in enumerate(x)]
        if isinstance(x, Mapping):
            if all(isinstance(k, str) and not k.startswith("$") for k in x):
                return {str(k): self.encode(v, f"{path}/{k}") for k, v in x.items()}
            return {
                "$dict": [
                    [self.encode(k, f"{path}/{k!r} (key)"), self.encode(v, f"{path}/{k}")]
                    for k, v in x.items()
                ]
            }
        raise CheckpointError(
            f"state {path or '/'}: cannot store a {type(x).__module__}.{type(x).__qualname__} "
            "in a data-only checkpoint (allowed: dict, list, tuple, str, int, float, bool, "
            "None, numpy arrays and scalars, torch tensors)"
        )


class _Decoder:
    """JSON value + arrays -> the tree; every surprise is a ``CheckpointError``."""

    def __init__(self, arrays: Mapping[str, np.ndarray], where: str) -> None:
        self.arrays = arrays
        self.used: set[str] = set()
        self.where = where

    def fail(self, path: str, what: str) -> CheckpointError:
        return CheckpointError(f"{self.where}: at {path or '/'} {what}")

    def _array(self, name: Any, path: str) -> np.ndarray:
        if not isinstance(name, str) or name not in self.arrays:
            raise self.fail(path, f"refers to array {name!r}, which is not in {ARRAYS_FILE}")
        if name in self.used:
            raise self.fail(path, f"refers to array {name!r} a second time")
        self.used.add(name)
        return self.arrays[name]

    def decode(self, x: Any, path: str = "", depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail(path, f"nests deeper than {_MAX_DEPTH} levels")
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [self.decode(v, f"{path}/{i}", depth + 1) for i, v in enumerate(x)]
        if not isinstance(x, dict):  # json.loads makes nothing else
            raise self.fail(path, f"holds an unexpected {type(x).__name__}")
        tags = [k for k in x if k.startswith("$")]
        if not tags:
            return {k: self.decode(v, f"{path}/{k}", depth + 1) for k, v in x.items()}
        if len(x) != 1:
            raise self.fail(path, f"mixes the tag {tags[0]!r} with other keys")
        ((tag, value),) = x.items()
        if tag == "$array":
            return self._array(value, path)
        if tag == "$scalar":
            arr = self._array(value, path)
            if arr.ndim != 0:
                raise self.fail(path, f"expects a 0-d array for a scalar, got shape {arr.shape}")
            return arr[()]
        if tag == "$tensor":
            import torch

            return torch.from_numpy(self._array(value, path))
        if tag == "$float":
            if value not in _NONFINITE:
                raise self.fail(path, f"has $float {value!r}; expected nan, inf or -inf")
            return _NONFINITE[value]
        if tag == "$tuple":
            if not isinstance(value, list):
                raise self.fail(path, "has a $tuple that is not a list")
            return tuple(self.decode(v, f"{path}/{i}", depth + 1) for i, v in enumerate(value))
        if tag == "$dict":
            if not isinstance(value, list):
                raise self.fail(path, "has a $dict that is not a list of [key, value] pairs")
            out: dict[Any, Any] = {}
            for i, pair in enumerate(value):
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise self.fail(f"{path}/{i}", "is not a [key, value] pair")
                key = self.decode(pair[0], f"{path}/{i}/0", depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise self.fail(f"{path}/{i}/0", "is a key that is not hashable") from None
                if key in out:
                    raise self.fail(f"{path}/{i}/0", f"repeats the key {key!r}")
                out[key] = self.decode(pair[1], f"{path}/{key}", depth + 1)
            return out
        raise self.fail(path, f"has an unknown tag {tag!r}")


def write_state(directory: str | os.PathLike[str], tree: Any) -> None:
    """Write ``tree`` to ``directory/state.json`` and ``directory/arrays.npz``.

    The directory must exist; the caller makes the write atomic (``Algorithm.save``
    writes to a temporary directory and renames it).

    Raises:
        CheckpointError: ``tree`` holds a value the format cannot store (an object, a set,
            bytes, an object-dtype array); the message gives its path in the tree.
    """
    directory = Path(directory)
    enc = _Encoder()
    body = enc.encode(tree)
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **enc.arrays)
    blob = buf.getvalue()
    (directory / ARRAYS_FILE).write_bytes(blob)
    doc = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "arrays_sha256": hashlib.sha256(blob).hexdigest(),
        "tree": body,
    }
    text = json.dumps(doc, allow_nan=False, separators=(",", ":"), sort_keys=False)
    (directory / STATE_FILE).write_text(text + "\n", encoding="utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not strict JSON")


def read_state(directory: str | os.PathLike[str]) -> Any:
    """Read the tree ``write_state`` wrote to ``directory``; never unpickles.

    Returns:
        The tree: the same nesting, types, dtypes, shapes and bits as written (torch
        tensors come back as CPU tensors sharing memory with freshly read arrays).

    Raises:
        CheckpointError: the files are missing, corrupt, truncated or hand-edited (not
            valid JSON, wrong format tag or version, an npz whose SHA-256 differs from
            the one recorded, an array of Python objects, an unknown ``$`` tag, a
            reference to a missing array, or an array nothing refers to), or the
            directory holds only an old ``state.pkl`` (refused: unpickling can run code).
    """
    directory = Path(directory)
    state_file = directory / STATE_FILE
    if not state_file.is_file():
        if (directory / LEGACY_STATE_FILE).exists():
            raise CheckpointError(
                f"{directory}: checkpoint in the old pickle format ({LEGACY_STATE_FILE}); "
                "it is not loaded because unpickling a file can run arbitrary code. "
                "Start a new run (checkpoints are now data-only JSON + npz)"
            )
        raise CheckpointError(f"{directory}: no {STATE_FILE}; not a complete checkpoint")
    where = str(state_file)
    try:
        doc = json.loads(state_file.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{where}: not readable JSON ({exc})") from None
    expected = {"format", "version", "arrays_sha256", "tree"}
    if not isinstance(doc, dict) or set(doc) != expected:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise CheckpointError(
            f"{where}: expected an object with keys {sorted(expected)}, got {got}"
        )
    if doc["format"] != FORMAT or doc["version"] != FORMAT_VERSION:
        raise CheckpointError(
            f"{where}: format {doc['format']!r} version {doc['version']!r}; this plangraph "
            f"reads {FORMAT!r} version {FORMAT_VERSION}"
        )
    arrays_file = directory / ARRAYS_FILE
    try:
        blob = arrays_file.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{arrays_file}: cannot read ({exc.strerror or exc})") from None
    if hashlib.sha256(blob).hexdigest() != doc["arrays_sha256"]:
        raise CheckpointError(
            f"{arrays_file}: does not match {STATE_FILE} (SHA-256 differs): the checkpoint "
            "is truncated, corrupt or was edited"
        )
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise CheckpointError(f"{arrays_file}: not a data-only npz archive ({exc})") from None
    dec = _Decoder(arrays, where)
    tree = dec.decode(doc["tree"])
    unused = sorted(set(arrays) - dec.used)
    if unused:
        raise CheckpointError(
            f"{arrays_file}: arrays {unused[:5]} are not referred to by {STATE_FILE}"
        )
    return tree
