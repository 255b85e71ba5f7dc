"""Offline experience: the recorded schema, Parquet files of bounded size, and datasets.

A recorded dataset is a folder (local, or any URI ``pyarrow.fs`` and Ray Data read:
``s3://``, ``gs://``, ...) of Parquet files plus a ``metadata.json``. It is an open format:
any Parquet reader reads it, and a dataset made by another tool is read back as long as it
has the columns below.

Schema (``SCHEMA_VERSION`` 1), one row per env step (per agent step in a multi-agent plan):

================ ============================ ===================================================
column           Parquet type                 meaning
================ ============================ ===================================================
``obs``          the obs dtype, or a fixed-   observation ``s_t``, ``[*obs_shape]`` flattened
                 size list of it              row-major (shape in the schema metadata)
``actions``      int64 (Discrete); fixed-size ``a_t``: the behaviour policy's action (Box: the
                 list of float32 (Box) or     unclipped Gaussian sample; the env got it
                 int64 (MultiDiscrete)        clipped to the bounds)
``rewards``      float32                      ``r_t``
``terminateds``  bool                         ``s_{t+1}`` is terminal (bootstrap with 0)
``truncateds``   bool                         the episode was cut by a time limit after ``t``
``eps_id``       int64                        episode id, unique within the recording (a
                                              random multiple of 2**48 added per recording
                                              keeps mixed recordings' episodes apart)
``t``            int64                        step index of the row in its episode (0-based)
``action_logp``  float32 (optional)           ``log pi_b(a_t | s_t)`` of the behaviour policy
                                              (absent when it has none: DQN's epsilon-greedy)
``next_obs``     as ``obs`` (optional)        ``s_{t+1}``; the final observation at an episode
                                              end (recorded when the batch holds it: SAC, DQN)
``agent_index``  int64 (multi-agent)          index of the agent in its env
``policy_id``    string (multi-agent)         the policy that acted for the agent
================ ============================ ===================================================

Each file's Arrow schema carries ``plangraph.shapes`` (JSON: column -> row shape) in its
metadata, so multi-dimensional columns read back in their shape; files are written under a
hidden name and renamed when complete, so a reader never sees half a file. Nothing read
from a dataset is executed: Parquet and JSON are data.

``ExperienceWriter`` appends batches and writes a file whenever ``max_file_bytes`` of rows
are buffered (files are at most about that size before compression), on a background thread
so that sampling waits for neither compression nor the disk. ``inspect_dataset`` reads
only the files' footers (schema and row counts) and ``check_layout`` compares the columns
with an env's spaces, both before any actor starts; ``OfflineDataset`` streams a dataset
through ``ray.data.read_parquet`` in epochs, shuffled (file order per epoch, and rows
through a bounded buffer) and split over reader actors, never loading it whole into the
driver.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import math
import os
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from plangraph.errors import DatasetError

__all__ = [
    "REQUIRED_COLUMNS",
    "SCHEMA_VERSION",
    "ActionBounds",
    "DatasetInfo",
    "ExperienceWriter",
    "OfflineDataset",
    "action_bounds",
    "check_layout",
    "describe_space",
    "discounted_returns",
    "inspect_dataset",
    "read_metadata",
    "record_columns",
    "table_columns",
    "to_table",
]

SCHEMA_VERSION = 1
"""Version of the recorded schema (``metadata.json``'s ``schema_version``)."""
REQUIRED_COLUMNS: tuple[str, ...] = (
    "obs",
    "actions",
    "rewards",
    "terminateds",
    "truncateds",
    "eps_id",
    "t",
)
"""Columns every recorded row has."""
OPTIONAL_COLUMNS: tuple[str, ...] = ("action_logp", "next_obs", "agent_index", "policy_id")
"""Columns recorded when the sampled batch has them."""
DERIVED_COLUMNS: tuple[str, ...] = ("returns",)
"""Columns a reader adds when the learner reads them (``returns``: discounted return to go,
``OfflineDataset(returns_gamma=...)``)."""
SHAPES_KEY = b"plangraph.shapes"
METADATA_FILE = "metadata.json"
_DEFAULT_FILE_BYTES = 64 * 2**20


def _filesystem(path: str) -> tuple[Any, str]:
    """``(pyarrow filesystem, path inside it)`` for a local path or a URI.

    Raises:
        DatasetError: the URI's scheme is not one pyarrow can open.
    """
    import pyarrow.fs as pafs

    if "://" in path and not path.startswith("file://"):
        try:
            return pafs.FileSystem.from_uri(path)
        except Exception as exc:
            raise DatasetError(f"dataset {path!r}: cannot open this URI ({exc})") from exc
    local = path.removeprefix("file://")
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(local))


# -- spaces ---------------------------------------------------------------------------------


def describe_space(space: gym.Space[Any]) -> dict[str, Any]:
    """A gymnasium space as plain JSON data (``type``, ``shape``, ``dtype``; ``n`` for
    ``Discrete``, ``nvec`` for ``MultiDiscrete``, ``low``/``high`` for ``Box``: lists,
    infinities as ``"inf"``/``"-inf"`` strings)."""

    def finite(xs: np.ndarray) -> list[Any]:
        return [x if math.isfinite(x) else ("inf" if x > 0 else "-inf") for x in xs.tolist()]

    out: dict[str, Any] = {
        "type": type(space).__name__,
        "shape": list(space.shape or ()),
        "dtype": str(np.dtype(space.dtype)) if space.dtype is not None else None,
    }
    if isinstance(space, gym.spaces.Discrete):
        out["n"] = int(space.n)
    elif isinstance(space, gym.spaces.MultiDiscrete):
        out["nvec"] = np.asarray(space.nvec).reshape(-1).tolist()
    elif isinstance(space, gym.spaces.Box):
        out["low"] = finite(np.asarray(space.low, dtype=np.float64).reshape(-1))
        out["high"] = finite(np.asarray(space.high, dtype=np.float64).reshape(-1))
    return out


# -- Arrow conversion -----------------------------------------------------------------------


def to_table(columns: Mapping[str, np.ndarray]) -> Any:
    """Numpy columns (each ``[B, ...]``; numeric, bool or str) -> a ``pyarrow.Table``.

    A column of rows of shape ``()`` becomes a primitive column, any other row shape a
    fixed-size list of the flattened row; the row shapes go into the schema metadata
    (``plangraph.shapes``).

    Raises:
        ValueError: the columns disagree on ``B``.
    """
    import pyarrow as pa

    arrays, names, shapes = [], [], {}
    rows = {len(v) for v in columns.values()}
    if len(rows) > 1:
        raise ValueError(f"columns disagree on their row count: {sorted(rows)}")
    for name, value in columns.items():
        arr = np.asarray(value)
        shapes[name] = list(arr.shape[1:])
        if arr.dtype.kind in "US" or arr.dtype == object:
            arrays.append(pa.array(arr.astype(str).tolist(), type=pa.string()))
        elif arr.ndim == 1:
            arrays.append(pa.array(arr))
        else:
            size = int(np.prod(arr.shape[1:]))
            flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
            arrays.append(pa.FixedSizeListArray.from_arrays(flat, size))
        names.append(name)
    schema_meta = {SHAPES_KEY: json.dumps(shapes).encode()}
    return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(schema_meta)


def table_columns(table: Any, shapes: Mapping[str, Sequence[int]]) -> dict[str, np.ndarray]:
    """A ``pyarrow.Table`` (or record batch) of the recorded schema -> numpy columns
    ``[B, *shape]``, the row shapes from ``shapes`` (column -> row shape; a column not
    named there is ``[B]``, or ``[B, list size]`` for a list column)."""
    import pyarrow as pa

    out: dict[str, np.ndarray] = {}
    for name in table.column_names:
        col = table.column(name)
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_fixed_size_list(col.type):
            flat = col.flatten().to_numpy(zero_copy_only=False)
            shape = tuple(shapes.get(name, (col.type.list_size,)))
            out[name] = flat.reshape(len(col), *shape)
        elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            out[name] = np.asarray(col.to_pylist(), dtype=object)
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    return out


def record_columns(batch: Any) -> list[dict[str, np.ndarray]]:
    """The rows of a sampled batch as recorded: one column dict per ``SampleBatch``, or per
    policy of a ``MultiAgentBatch`` (with ``policy_id``), each with the schema's columns
    that the batch has (``REQUIRED_COLUMNS`` and those of ``OPTIONAL_COLUMNS``).

    Raises:
        ValueError: the batch lacks a required column.
    """
    per_policy = getattr(batch, "policy_batches", None)
    parts = per_policy.items() if per_policy is not None else [(None, batch)]
    out = []
    for pid, b in parts:
        if b.count == 0:
            continue
        missing = [c for c in REQUIRED_COLUMNS if c not in b]
        if missing:
            raise ValueError(
                f"a sampled batch lacks the recorded column(s) {missing} (it has {sorted(b)})"
            )
        cols = {c: b[c] for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in b}
        if pid is not None:
            cols["policy_id"] = np.full(b.count, pid, dtype=object)
        out.append(cols)
    return out


# -- writing --------------------------------------------------------------------------------


class ExperienceWriter:
    """Appends experience to Parquet files of bounded size under ``path``.

    Args:
        path: the dataset folder (created; a local path or a URI pyarrow writes).
        metadata: what ``metadata.json`` holds besides ``schema_version`` and ``columns``
            (env id and spaces, plan, seed, plangraph version); written at once, or checked
            against the folder's existing one (a resumed run appends to its recording).
        max_file_bytes: uncompressed bytes of rows per file, at most (a file is written as
            soon as this many are buffered; a batch is never split over files).
        prefix: the start of every file name (e.g. the plan node id).

    Raises:
        DatasetError: the folder cannot be created, or holds a ``metadata.json`` of
            another env or spaces.
    """

    def __init__(
        self,
        path: str,
        *,
        metadata: Mapping[str, Any],
        max_file_bytes: int = _DEFAULT_FILE_BYTES,
        prefix: str = "part",
    ) -> None:
        self.path = path
        self.fs, self.root = _filesystem(path)
        self.max_file_bytes = int(max_file_bytes)
        recording = uuid.uuid4()
        self.prefix = f"{prefix}-{recording.hex[:8]}"
        #: added to every eps_id: a run's ids (worker index * 2**40 + counter) are unique
        #: within the run; this random multiple of 2**48 keeps two recordings' episodes
        #: apart when their files are read as one dataset
        self.eps_id_offset = (recording.int % 2**14) << 48
        self.metadata = dict(metadata)
        self.rows_written = 0
        self.files_written = 0
        self._tables: list[Any] = []
        self._bytes = 0
        self._columns: tuple[str, ...] | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="record")
        self._writes: list[concurrent.futures.Future[None]] = []
        try:
            self.fs.create_dir(self.root, recursive=True)
        except OSError as exc:
            raise DatasetError(f"recording to {path!r}: cannot create the folder ({exc})") from exc

    def _check_metadata(self, columns: Mapping[str, Any]) -> None:
        meta_path = f"{self.root}/{METADATA_FILE}"
        layout = {
            k: {"shape": list(v.shape[1:]), "dtype": str(v.dtype)} for k, v in columns.items()
        }
        for v in layout.values():
            if v["dtype"] == "object":
                v["dtype"] = "string"
        full = {"schema_version": SCHEMA_VERSION, **self.metadata, "columns": layout}
        existing = read_metadata(self.path)
        if existing is not None:
            for key in ("env", "observation_space", "action_space", "columns"):
                if key in existing and existing[key] != full.get(key):
                    raise DatasetError(
                        f"recording to {self.path!r}: its {METADATA_FILE} was written for "
                        f"another {key} ({existing[key]!r}, this run: {full.get(key)!r}); "
                        "record into a new folder"
                    )
            return
        with self.fs.open_output_stream(meta_path) as out:
            out.write(json.dumps(full, indent=2, sort_keys=True).encode())

    def write(self, columns: Mapping[str, np.ndarray]) -> None:
        """Buffer one batch's columns (``record_columns`` output); write a file when full.

        Raises:
            DatasetError: the columns differ from the first batch's, or an earlier file
                could not be written (the cause chained).
        """
        self._raise_failed()
        names = tuple(columns)
        if self._columns is None:
            self._check_metadata(columns)
            self._columns = names
        elif names != self._columns:
            raise DatasetError(
                f"recording to {self.path!r}: a batch has columns {list(names)}, the first "
                f"had {list(self._columns)}; one recording holds one schema"
            )
        if "eps_id" in columns:
            columns = {**columns, "eps_id": np.asarray(columns["eps_id"]) + self.eps_id_offset}
        table = to_table(columns)
        self._tables.append(table)
        self._bytes += table.nbytes
        self.rows_written += table.num_rows
        if self._bytes >= self.max_file_bytes:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one file (on the writer thread; not waited for)."""
        if not self._tables:
            return
        import pyarrow as pa

        table = pa.concat_tables(self._tables)
        self._tables, self._bytes = [], 0
        name = f"{self.prefix}-{self.files_written:06d}.parquet"
        self.files_written += 1
        self._writes.append(self._pool.submit(self._write_file, table, name))

    def _write_file(self, table: Any, name: str) -> None:
        import pyarrow.parquet as pq

        hidden = f"{self.root}/.{name}.tmp"
        # Row groups of about 8 MiB: a reader's unit, so reading holds little at a time.
        per_row = max(1, table.nbytes // max(1, table.num_rows))
        group = max(1, min(table.num_rows, (8 * 2**20) // per_row))
        pq.write_table(table, hidden, filesystem=self.fs, compression="zstd", row_group_size=group)
        self.fs.move(hidden, f"{self.root}/{name}")

    def _raise_failed(self, wait: bool = False) -> None:
        pending = []
        for f in self._writes:
            if wait or f.done():
                exc = f.exception()
                if exc is not None:
                    raise DatasetError(
                        f"recording to {self.path!r}: writing a file failed: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            else:
                pending.append(f)
        self._writes = pending

    def close(self) -> None:
        """Write what is buffered and wait for every file. Idempotent.

        Raises:
            DatasetError: a file could not be written.
        """
        self.flush()
        try:
            self._raise_failed(wait=True)
        finally:
            self._pool.shutdown(wait=True)


def read_metadata(path: str) -> dict[str, Any] | None:
    """A dataset folder's ``metadata.json`` as data, or None when it has none.

    Raises:
        DatasetError: it is not a JSON object.
    """
    fs, root = _filesystem(path)
    meta_path = f"{root}/{METADATA_FILE}"
    import pyarrow.fs as pafs

    if fs.get_file_info(meta_path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(meta_path) as f:
        try:
            data = json.loads(f.read().decode())
        except ValueError as exc:
            raise DatasetError(f"dataset {path!r}: {METADATA_FILE} is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise DatasetError(f"dataset {path!r}: {METADATA_FILE} is not a JSON object")
    return data


# -- reading: footers only ------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetInfo:
    """What the footers of a dataset's Parquet files say, read before launch.

    Attributes:
        path: the dataset as given.
        files: the Parquet files (paths inside ``filesystem``), sorted.
        filesystem: the ``pyarrow.fs`` filesystem they are in.
        num_rows: rows over all files.
        columns: column -> ``(row shape, numpy dtype name)``; ``"string"`` for strings.
        row_groups: ``(file, row group index, rows)`` of every row group, the units the
            readers read (one Ray Data read task each).
    """

    path: str
    files: tuple[str, ...]
    filesystem: Any = field(repr=False, compare=False)
    num_rows: int
    columns: dict[str, tuple[tuple[int, ...], str]]
    row_groups: tuple[tuple[str, int, int], ...] = ()

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Column -> row shape."""
        return {k: v[0] for k, v in self.columns.items()}


def _layout(schema: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    import pyarrow as pa

    meta = schema.metadata or {}
    try:
        shapes = json.loads(meta.get(SHAPES_KEY, b"{}"))
    except ValueError:
        shapes = {}
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for f in schema:
        t = f.type
        if pa.types.is_fixed_size_list(t):
            shape = tuple(int(x) for x in shapes.get(f.name, (t.list_size,)))
            if int(np.prod(shape)) != t.list_size:
                shape = (t.list_size,)
            out[f.name] = (shape, np.dtype(t.value_type.to_pandas_dtype()).name)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            out[f.name] = ((), "string")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            out[f.name] = ((-1,), f"list<{t.value_type}>")
        else:
            try:
                out[f.name] = ((), np.dtype(t.to_pandas_dtype()).name)
            except (NotImplementedError, TypeError):
                out[f.name] = ((), str(t))
    return out


def inspect_dataset(path: str) -> DatasetInfo:
    """List a dataset's Parquet files and read their footers (schema, row counts) only.

    ``path`` is a folder (every ``*.parquet`` below it, hidden names skipped), one file,
    or a URI of either.

    Raises:
        DatasetError: the path does not exist, holds no Parquet file, holds no rows, a
            file is not Parquet (corrupt or truncated: the file named), or two files have
            different columns (both named).
    """
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    fs, root = _filesystem(path)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise DatasetError(
            f"dataset {path!r} does not exist (record one with `plangraph run PLAN --record "
            "DIR`, or give the folder of an existing recording)"
        )
    if info.type == pafs.FileType.File:
        files = [root]
    else:
        listing = fs.get_file_info(pafs.FileSelector(root, recursive=True))
        files = sorted(
            f.path
            for f in listing
            if f.type == pafs.FileType.File
            and f.path.endswith(".parquet")
            and not any(part.startswith((".", "_")) for part in f.path[len(root) :].split("/"))
        )
    if not files:
        raise DatasetError(
            f"dataset {path!r} holds no .parquet file (an empty folder, or a recording that "
            "never wrote a file)"
        )
    rows = 0
    groups: list[tuple[str, int, int]] = []
    first: dict[str, tuple[tuple[int, ...], str]] | None = None
    first_file = files[0]
    for f in files:
        try:
            with fs.open_input_file(f) as handle:
                meta = pq.ParquetFile(handle).metadata
                layout = _layout(meta.schema.to_arrow_schema())
        except Exception as exc:
            raise DatasetError(
                f"dataset {path!r}: file {f!r} is not a readable Parquet file "
                f"({type(exc).__name__}: {exc}); remove or replace it"
            ) from exc
        rows += meta.num_rows
        groups += [
            (f, k, meta.row_group(k).num_rows)
            for k in range(meta.num_row_groups)
            if meta.row_group(k).num_rows > 0
        ]
        if first is None:
            first = layout
        elif layout != first:
            diff = sorted(k for k in set(layout) | set(first) if layout.get(k) != first.get(k))
            raise DatasetError(
                f"dataset {path!r}: file {f!r} has other columns than {first_file!r} "
                f"(differing: {diff}: {[layout.get(k) for k in diff]} vs "
                f"{[first.get(k) for k in diff]}); one dataset holds one schema"
            )
    if rows == 0 or first is None:
        raise DatasetError(f"dataset {path!r} holds no rows ({len(files)} empty Parquet file(s))")
    return DatasetInfo(path, tuple(files), fs, rows, first, tuple(groups))


def check_layout(
    info: DatasetInfo,
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    needed: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Problems of a dataset's columns for an env's spaces and a learner's columns.

    Args:
        info: the dataset's footers (``inspect_dataset``).
        observation_space, action_space: the env's spaces (what evaluation acts in).
        needed: further columns the learner reads (e.g. ``action_logp``).

    Returns:
        ``(column, message)`` per problem: a missing column, or a dtype or row shape the
        spaces do not allow (``obs`` must have the observation space's shape and dtype;
        ``actions`` int64 ``()`` for ``Discrete``, a float of the space's shape for
        ``Box``, ...).
    """
    cols = info.columns
    problems: list[tuple[str, str]] = []
    for name in (*REQUIRED_COLUMNS, *needed):
        if name not in cols and name not in (c for c, _ in problems):
            problems.append((name, f"column {name!r} is missing (columns: {sorted(cols)})"))

    def want(name: str, shape: tuple[int, ...], kinds: str, what: str) -> None:
        if name not in cols:
            return
        got_shape, dtype = cols[name]
        kind: str
        try:
            kind = np.dtype(dtype).kind
        except TypeError:
            kind = "?"
        if tuple(got_shape) != tuple(shape) or kind not in kinds:
            problems.append(
                (
                    name,
                    f"column {name!r} holds {dtype} rows of shape {list(got_shape)}; the env "
                    f"needs {what} of shape {list(shape)}",
                )
            )

    obs_dtype = np.dtype(observation_space.dtype) if observation_space.dtype else None
    obs_shape = tuple(observation_space.shape or ())
    for name in ("obs", "next_obs"):
        if name in cols and obs_dtype is not None:
            got_shape, dtype = cols[name]
            if tuple(got_shape) != obs_shape or dtype != obs_dtype.name:
                problems.append(
                    (
                        name,
                        f"column {name!r} holds {dtype} rows of shape {list(got_shape)}; "
                        f"the env's observations are {obs_dtype.name} of shape "
                        f"{list(obs_shape)}",
                    )
                )
    if isinstance(action_space, gym.spaces.Discrete):
        if "actions" in cols and np.dtype(cols["actions"][1]).kind == "f":
            problems.append(
                (
                    "actions",
                    f"column 'actions' holds continuous (float) actions, but the env's "
                    f"actions are Discrete({action_space.n}); was the dataset recorded in "
                    "another env?",
                )
            )
        else:
            want("actions", (), "iu", "integer actions")
    elif isinstance(action_space, gym.spaces.Box):
        if "actions" in cols and np.dtype(cols["actions"][1]).kind in "iub":
            problems.append(
                (
                    "actions",
                    "column 'actions' holds discrete (integer) actions, but the env's actions "
                    f"are continuous (Box of shape {list(action_space.shape)})",
                )
            )
        else:
            want("actions", tuple(action_space.shape), "f", "float actions")
    elif action_space.shape is not None:
        want("actions", tuple(action_space.shape), "iu", "integer actions")
    want("rewards", (), "f", "float rewards")
    want("terminateds", (), "b", "bool flags")
    want("truncateds", (), "b", "bool flags")
    want("eps_id", (), "iu", "integer episode ids")
    want("t", (), "iu", "integer step indexes")
    want("action_logp", (), "f", "float log-probabilities")
    return problems


def discounted_returns(columns: Mapping[str, np.ndarray], gamma: float) -> np.ndarray:
    """Discounted return to go ``R_t = r_t + gamma * R_{t+1}`` of every row, float32 ``[B]``.

    Rows are grouped into episodes by ``eps_id`` and ordered by ``t``; the recursion stops
    at each episode's last row present (no bootstrap: an episode cut by a time limit, or by
    the end of the recording, is summed as far as it was recorded).
    """
    eps = np.asarray(columns["eps_id"])
    order = np.lexsort((np.asarray(columns["t"]), eps))
    rewards = np.asarray(columns["rewards"], dtype=np.float64)[order]
    eps_sorted = eps[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = eps_sorted[1:] != eps_sorted[:-1]
    out = np.empty(len(order), dtype=np.float64)
    running = 0.0
    for i in range(len(order) - 1, -1, -1):
        running = rewards[i] + (0.0 if last[i] else gamma * running)
        out[i] = running
    result = np.empty(len(order), dtype=np.float32)
    result[order] = out
    return result


# -- reading: streamed through Ray Data -----------------------------------------------------


_GROUP_COLUMN = "__plangraph_row_group"
"""Column each read row group carries to the consumer: its index in
``DatasetInfo.row_groups``, so that a bad row is named by its file and row group."""


ActionBounds = tuple[np.ndarray, np.ndarray]
"""``(low, high)`` of a discrete action space, int64, ``low <= a < high``: shape ``()``
for ``Discrete(n, start)`` (``start, start + n``), ``[K]`` for ``MultiDiscrete(nvec,
start)`` (``start, start + nvec``)."""


def action_bounds(space: gym.Space[Any]) -> ActionBounds | None:
    """The integer range of ``space``'s actions (``ActionBounds``); None for a ``Box``."""
    if isinstance(space, gym.spaces.Discrete):
        first = int(space.start)
        return np.asarray(first, np.int64), np.asarray(first + int(space.n), np.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        starts = np.asarray(space.start, np.int64).reshape(-1)
        return starts, starts + np.asarray(space.nvec, np.int64).reshape(-1)
    return None


def _bad_rows(
    columns: Mapping[str, np.ndarray], bounds: ActionBounds | None
) -> tuple[str, str, np.ndarray] | None:
    """The first column a learner must not read as it is, what is wrong with it, and its
    bad rows (bool ``[B]``): a NaN or infinite float (rewards, observations, actions,
    log-probs), or a discrete action outside ``bounds``; None when every row is fine."""
    for name in ("rewards", "obs", "actions", "action_logp"):
        value = columns.get(name)
        if value is None or np.asarray(value).dtype.kind != "f":
            continue
        bad = ~np.isfinite(value)
        if bad.any():
            return name, "NaN or infinite values", bad.reshape(len(bad), -1).any(axis=1)
    actions = columns.get("actions")
    if bounds is not None and actions is not None and np.asarray(actions).dtype.kind in "iu":
        low, high = bounds
        bad = (actions < low) | (actions >= high)
        if bad.any():
            allowed = f"{low.tolist()} <= a < {high.tolist()}"
            rows = np.asarray(np.asarray(bad).reshape(len(bad), -1).any(axis=1))
            return "actions", f"actions outside the env's action space ({allowed})", rows
    return None


def _check_batch(
    info: DatasetInfo, columns: dict[str, np.ndarray], bounds: ActionBounds | None = None
) -> dict[str, np.ndarray]:
    """``columns`` without the row-group column, once its rows are checked: the rows a
    learner must not see (a NaN or infinite reward, observation, action or log-prob, a
    discrete action outside ``bounds``) are refused when the batch holding them is
    consumed, so every batch before it is trained on (and checkpointed) as usual.

    Raises:
        DatasetError: names the file, the row group and the column, and how many rows.
    """
    groups = columns.pop(_GROUP_COLUMN)
    found = _bad_rows(columns, bounds)
    if found is None:
        return columns
    name, what, bad = found
    first = int(np.argmax(bad))
    position = int(groups[first])
    file, index, _rows = info.row_groups[position]
    rows = int((bad & (groups == position)).sum())
    at = ", ".join(f"{key} {int(columns[key][first])}" for key in ("eps_id", "t") if key in columns)
    value = np.array2string(np.asarray(columns[name][first]), threshold=8)
    raise DatasetError(
        f"dataset {info.path!r}: file {file!r}, row group {index}: column {name!r} holds "
        f"{what} in {rows} of the {int((groups == position).sum())} rows of it read into "
        f"this batch (the first at {at or f'batch row {first}'}: {value}); clean the "
        "dataset (e.g. drop those rows)"
    )


class OfflineDataset:
    """A recorded dataset streamed through Ray Data, one epoch after another.

    Args:
        info: the dataset's footers (``inspect_dataset``), checked before launch.
        shuffle_buffer_size: rows in the local shuffle buffer (0: no row shuffle); the file
            order is also shuffled each epoch when > 0.
        num_readers: reader actors the dataset is split over (``streaming_split``); 1: the
            driver pulls the stream itself.
        seed: seeds the file order and the shuffle buffer (epoch ``e`` uses ``seed + e``).
        read_concurrency: Ray Data read tasks at once (keeps a small machine responsive).
        returns_gamma: when set, a ``returns`` column (float32 ``[B]``, the discounted
            return to go of each row, ``discounted_returns``) is added before shuffling,
            by a Ray Data groupby on ``eps_id`` (a learner such as MARWIL reads it).
        action_bounds: the env's discrete action range (``action_bounds(space)``): a
            batch with an action outside it is refused like a NaN (the learners do not
            validate actions: ``ActorCriticPolicy.dist``); None for a ``Box``.
    """

    def __init__(
        self,
        info: DatasetInfo,
        *,
        shuffle_buffer_size: int = 10_000,
        num_readers: int = 1,
        seed: int = 0,
        read_concurrency: int = 2,
        returns_gamma: float | None = None,
        action_bounds: ActionBounds | None = None,
    ) -> None:
        self.info = info
        self.action_bounds = action_bounds
        self.shuffle_buffer_size = int(shuffle_buffer_size)
        self.num_readers = int(num_readers)
        self.seed = int(seed) % (2**31)
        self.read_concurrency = int(read_concurrency)
        self.returns_gamma = returns_gamma
        self._actors: list[Any] = []

    def ray_dataset(self, epoch: int) -> Any:
        """The lazy ``ray.data.Dataset`` of one epoch (file order shuffled by epoch), its
        rows unchecked and carrying the row-group column ``_GROUP_COLUMN`` (the batches of
        ``epoch_batches`` and the readers check the rows and drop it)."""
        import ray.data

        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        # Ray Data's per-execution INFO lines would interleave with the progress line.
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        # The blocks in the order read (this epoch's file order), whichever read task ends
        # first: batches, and a bad row's error, come in the same order run after run.
        ctx.execution_options.preserve_order = True
        positions = list(range(len(self.info.row_groups)))
        if self.shuffle_buffer_size > 0:  # a new order of the row groups each epoch
            order = np.random.default_rng([self.seed, epoch]).permutation(len(positions))
            positions = [int(p) for p in order]
        ds = ray.data.read_datasource(
            _row_group_source(self.info, positions),
            concurrency=max(1, min(self.read_concurrency, len(positions))),
            override_num_blocks=len(positions),
            num_cpus=0.25,
        )
        if self.returns_gamma is not None:
            # Whole episodes are needed: grouped by eps_id (a Ray Data shuffle, spilled to
            # disk when large), then the blocks' order randomised again.
            gamma = float(self.returns_gamma)
            shapes = self.info.shapes

            def add_returns(table: Any) -> Any:
                import pyarrow as pa

                cols = table_columns(table.select(["eps_id", "t", "rewards"]), shapes)
                return table.append_column("returns", pa.array(discounted_returns(cols, gamma)))

            ds = (
                ds.groupby("eps_id")
                .map_groups(
                    add_returns,
                    batch_format="pyarrow",
                    compute=ray.data.TaskPoolStrategy(size=self.read_concurrency),
                    num_cpus=0.25,
                )
                .randomize_block_order(seed=self.seed + epoch)
            )
        return ds

    def epoch_batches(self, batch_size: int, epoch: int) -> Iterator[dict[str, np.ndarray]]:
        """One epoch's batches of ``batch_size`` rows (the last may be smaller), pulled in
        this process (``num_readers == 1``)."""
        ds = self.ray_dataset(epoch)
        yield from _batches(
            ds.iter_batches,
            batch_size,
            self.shuffle_buffer_size,
            self.seed + epoch,
            self.info,
            self.action_bounds,
        )

    def batches(
        self, batch_size: int, start_epoch: Callable[[], int] = lambda: 0
    ) -> Iterator[dict[str, np.ndarray] | None]:
        """Batches without end: each epoch's batches, then None when an epoch ends.

        Args:
            batch_size: rows per batch (an epoch's last batch per reader may be smaller).
            start_epoch: called when the first batch is asked for: the epochs already read
                (a restored run goes on with the next epoch's shuffle).

        Raises:
            DatasetError: an epoch held no rows, or a batch holds NaN/infinite values.
            ray.exceptions.RayTaskError: a reader actor failed (its cause inside).
        """
        epoch = int(start_epoch())
        if self.num_readers == 1:
            while True:
                rows = 0
                for columns in self.epoch_batches(batch_size, epoch):
                    rows += len(columns["rewards"])
                    yield columns
                if rows == 0:
                    raise DatasetError(f"dataset {self.info.path!r}: an epoch read no rows")
                epoch += 1
                yield None
        import ray

        reader: Any = ray.remote(num_cpus=0)(ExperienceReader)
        self._actors = [
            reader.remote(self.info, batch_size, self.shuffle_buffer_size, self.action_bounds)
            for _ in range(self.num_readers)
        ]
        while True:
            # Each epoch: the files in a new order, split over the readers as they read.
            splits = self.ray_dataset(epoch).streaming_split(self.num_readers, equal=False)
            seeds = [self.seed + epoch * self.num_readers + k for k in range(self.num_readers)]
            pending = {
                a.next_batch.remote(seeds[k], splits[k]): (k, a) for k, a in enumerate(self._actors)
            }
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                k, actor = pending.pop(ready[0])
                columns = ray.get(ready[0])
                if columns is None:  # this reader's share of the epoch is read
                    continue
                yield columns
                pending[actor.next_batch.remote(seeds[k])] = (k, actor)
            epoch += 1
            yield None

    def reader_peak_rss_bytes(self) -> list[int]:
        """Each reader actor's peak resident memory so far (bytes); ``[]`` with one reader
        (the driver reads)."""
        import ray

        return [int(x) for x in ray.get([a.peak_rss_bytes.remote() for a in self._actors])]

    def stop(self) -> None:
        """Release the reader actors (idempotent)."""
        import ray

        for actor in self._actors:
            ray.kill(actor)
        self._actors = []


def _read_row_group(info: DatasetInfo, position: int) -> Any:
    """Row group ``info.row_groups[position]`` as a ``pyarrow.Table``, with its position in
    the int32 column ``_GROUP_COLUMN`` (its rows are checked where they are consumed:
    ``_check_batch``).

    Raises:
        DatasetError: the file or row group cannot be read (corrupt, truncated, gone), or
            its columns differ from the dataset's (the file and the row group named).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    file, index, _rows = info.row_groups[position]
    where = f"dataset {info.path!r}: file {file!r}, row group {index}"
    try:
        with info.filesystem.open_input_file(file) as handle:
            table = pq.ParquetFile(handle).read_row_group(index)
    except Exception as exc:
        raise DatasetError(
            f"{where} cannot be read ({type(exc).__name__}: {exc}); remove or replace the file"
        ) from exc
    layout = _layout(table.schema)
    if layout != info.columns:
        raise DatasetError(
            f"{where} has columns {layout}, the dataset {info.columns} (the file changed "
            "since the run started?)"
        )
    return table.append_column(
        _GROUP_COLUMN, pa.array(np.full(table.num_rows, position, dtype=np.int32))
    )


def _row_group_source(info: DatasetInfo, positions: Sequence[int]) -> Any:
    """A Ray Data ``Datasource`` reading the row groups ``info.row_groups[p]`` for ``p`` in
    ``positions``, one read task per row group, in this order."""
    from ray.data import Datasource, ReadTask
    from ray.data.block import BlockMetadata

    class RowGroups(Datasource):
        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(
            self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
        ) -> list[Any]:
            def read(position: int) -> Iterator[Any]:
                yield _read_row_group(info, position)

            return [
                ReadTask(
                    functools.partial(read, p),
                    BlockMetadata(
                        num_rows=info.row_groups[p][2],
                        size_bytes=None,
                        exec_stats=None,
                        input_files=(info.row_groups[p][0],),
                    ),
                    per_task_row_limit=per_task_row_limit,
                )
                for p in positions
            ]

    return RowGroups()


def _batches(
    iter_batches: Any,
    batch_size: int,
    buffer: int,
    seed: int,
    info: DatasetInfo,
    bounds: ActionBounds | None,
) -> Iterator[dict[str, np.ndarray]]:
    for table in iter_batches(
        batch_size=batch_size,
        batch_format="pyarrow",
        local_shuffle_buffer_size=buffer or None,
        local_shuffle_seed=seed if buffer else None,
        prefetch_batches=1,
    ):
        yield _check_batch(info, table_columns(table, info.shapes), bounds)


class ExperienceReader:
    """One reader of a split dataset (a Ray actor: ``ray.remote(ExperienceReader)``):
    pulls its share of an epoch from a ``ray.data.DataIterator`` (one of
    ``streaming_split``'s) and hands batches out one ``next_batch`` call at a time."""

    def __init__(
        self, info: DatasetInfo, batch_size: int, buffer: int, bounds: ActionBounds | None
    ) -> None:
        self.info = info
        self.bounds = bounds
        self.batch_size = batch_size
        self.buffer = buffer
        self._current: Iterator[dict[str, np.ndarray]] | None = None

    def next_batch(self, seed: int, iterator: Any = None) -> dict[str, np.ndarray] | None:
        """The next batch of this reader's share, or None at the end of its epoch;
        ``iterator`` (this reader's split of an epoch, shuffled with ``seed``) starts the
        next epoch."""
        if iterator is not None:
            self._current = _batches(
                iterator.iter_batches, self.batch_size, self.buffer, seed, self.info, self.bounds
            )
        if self._current is None:
            return None
        try:
            return next(self._current)
        except StopIteration:
            self._current = None
            return None

    def peak_rss_bytes(self) -> int:
        """This reader process's peak resident memory so far (bytes; Linux ``ru_maxrss``)."""
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
