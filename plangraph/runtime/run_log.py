"""Per-iteration result logs of a run directory: ``result.jsonl`` and TensorBoard events.

Layout of a run directory (``plangraph run --out DIR``)::

    DIR/result.jsonl            one JSON object per training iteration (sorted keys)
    DIR/events.out.tfevents.*   TensorBoard scalars (every numeric leaf, ``/``-joined keys)
    DIR/plan.json, plan.dot     the plan as compiled (a valid plan file) and drawn (plan.svg)
    DIR/checkpoints/iter_000010 checkpoints (see ``Algorithm.save``)
    DIR/profile.json            where the time went, per node and phase (``ir.profile``)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plangraph.runtime.result import Result


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "size", 1) == 1:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def flatten_scalars(result: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every finite numeric leaf of a nested result dict as ``("a/b", value)``, sorted."""
    for key in sorted(result, key=str):
        value = result[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten_scalars(value, prefix=f"{name}/")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)) and math.isfinite(value):
            yield name, float(value)


class RunLog:
    """Appends each iteration's result to ``result.jsonl`` and to TensorBoard event files.

    Re-opening a run directory (``--resume``) appends; earlier lines are kept.
    """

    def __init__(self, run_dir: Path, *, tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = (self.run_dir / "result.jsonl").open("a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            # torch's writer is the de-facto standard; imported here so that logging
            # without TensorBoard (tests, --no-tensorboard) does not pay for it.
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir))

    def write(self, result: Result) -> None:
        """Append ``result`` as one JSON line and its numeric leaves as TensorBoard scalars
        at step ``num_env_steps_sampled`` (env steps)."""
        self._jsonl.write(json.dumps(_jsonable(result), sort_keys=True) + "\n")
        self._jsonl.flush()
        if self._tb is not None:
            step = int(result.get("num_env_steps_sampled", result.get("iteration", 0)))
            for name, value in flatten_scalars(result):
                self._tb.add_scalar(name, value, global_step=step)
            self._tb.flush()

    def close(self) -> None:
        self._jsonl.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(run_dir: Path) -> list[Result]:
    """All results logged in ``run_dir/result.jsonl``, in order (non-finite floats read
    back as ``None``)."""
    path = Path(run_dir) / "result.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
