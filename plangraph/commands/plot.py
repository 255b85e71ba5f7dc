"""``plangraph plot RUN_DIR...``: learning curves of runs, drawn with matplotlib.

Reads each run's ``result.jsonl`` and draws ``--metric`` (default
``episode_return_mean``) against env steps sampled and against wall time
(``time_total_s``, s). Runs that differ only by their seed are one curve: the mean over
seeds with a shaded band (min to max, or one standard deviation with ``--band std``),
computed on a common grid where all of them have data (linear interpolation). Two runs
are seeds of one another when their ``run.json`` agree on everything but ``seed`` and
``stop``, or, without a ``run.json``, when their directory names agree once a
``seed<N>``/``seed=<N>`` part is removed; ``--group`` makes all given runs one curve.

matplotlib is an optional dependency: ``pip install 'plangraph[plot]'``.

Exit status: 0 written, 2 a run directory without results, an unknown metric, or no
matplotlib.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plangraph.text import count

X_AXES: dict[str, tuple[str, str]] = {
    "env_steps": ("num_env_steps_sampled", "env steps sampled"),
    "time": ("time_total_s", "wall time (s)"),
}
"""``--x`` choice -> (result key, axis label)."""

_SEED = re.compile(r"[-_,.]?seed[-_=]?\d+")
_TRIAL_ID = re.compile(r"-[0-9a-f]{5}_\d{5}$")  # plangraph tune's trial directory suffix
GRID_POINTS = 200


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plot",
        help="learning curves of runs (mean and spread over seeds) as an image",
        description=(
            "Draw METRIC of each RUN_DIR's result.jsonl against env steps and wall time. "
            "Runs that differ only by their seed are drawn as their mean with a band."
        ),
    )
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories")
    p.add_argument(
        "-o", "--output", type=Path, default=Path("curves.png"), help="image (default curves.png)"
    )
    p.add_argument(
        "--x",
        choices=(*X_AXES, "both"),
        default="both",
        help="x axis: env_steps, time (s) or both side by side (default)",
    )
    p.add_argument(
        "--metric",
        default="episode_return_mean",
        metavar="KEY",
        help="result key to draw, '/' for nested keys (default episode_return_mean), "
        "e.g. evaluation/episode_return_mean, learner/total_loss",
    )
    p.add_argument("--band", choices=("minmax", "std"), default="minmax", help="spread shown")
    p.add_argument("--group", action="store_true", help="draw all runs as seeds of one curve")
    p.add_argument("--title", help="figure title (default: the metric)")
    return p


def _error(msg: str) -> int:
    print(f"plangraph plot: error: {msg}", file=sys.stderr)
    return 2


def _lookup(result: Mapping[str, Any], key: str) -> Any:
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _keys(result: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for k, v in result.items():
        if isinstance(v, Mapping):
            out += _keys(v, f"{prefix}{k}/")
        elif isinstance(v, int | float) and not isinstance(v, bool):
            out.append(f"{prefix}{k}")
    return out


@dataclass(frozen=True)
class Curve:
    """One run's points: ``x`` per axis name and ``y`` (the metric), iterations without the
    metric (no episode finished yet) left out."""

    run_dir: Path
    xs: dict[str, list[float]]
    y: list[float]


def group_key(run_dir: Path) -> str:
    """What seeds of one configuration share: run.json less seed and stop, else the
    directory name less its seed part."""
    try:
        saved = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, dict):
        rest = {k: v for k, v in saved.items() if k not in ("seed", "stop")}
        return json.dumps(rest, sort_keys=True)
    return _SEED.sub("", run_dir.resolve().name)


def label_of(runs: Sequence[Path]) -> str:
    names = [_TRIAL_ID.sub("", _SEED.sub("", r.resolve().name)) for r in runs]
    name = names[0] if len(set(names)) == 1 else f"{names[0]} …"
    return f"{name} ({len(runs)} seeds)" if len(runs) > 1 else runs[0].resolve().name


def load_curve(run_dir: Path, metric: str) -> Curve | str:
    """The run's curve, or a message saying why there is none."""
    from plangraph.runtime.run_log import read_results

    try:
        results = read_results(run_dir)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{run_dir / 'result.jsonl'}: not readable JSON lines ({exc})"
    if not results:
        return f"{run_dir}: no result.jsonl with results; is it a `plangraph run` directory?"
    xs: dict[str, list[float]] = {name: [] for name in X_AXES}
    y: list[float] = []
    for r in results:
        value = _lookup(r, metric)
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        y.append(float(value))
        for name, (key, _) in X_AXES.items():
            xs[name].append(float(_lookup(r, key) or 0.0))
    if not y:
        known = sorted({k for r in results for k in _keys(r)})
        from plangraph.text import close_matches

        near = close_matches(metric, known)
        hint = f"; did you mean {' or '.join(near)}?" if near else f"; known keys: {known}"
        return f"--metric {metric}: no result of {run_dir} has it{hint}"
    return Curve(run_dir=run_dir, xs=xs, y=y)


def _mean_band(curves: Sequence[Curve], axis: str, band: str) -> tuple[Any, Any, Any, Any]:
    """Common grid over the x range all curves cover; mean and band of y on it."""
    import numpy as np

    lo = max(c.xs[axis][0] for c in curves)
    hi = min(c.xs[axis][-1] for c in curves)
    if hi <= lo:  # no overlap: mean over what each has at its own points is meaningless
        hi = lo
    grid = np.linspace(lo, hi, GRID_POINTS) if hi > lo else np.array([lo])
    ys = np.stack([np.interp(grid, c.xs[axis], c.y) for c in curves])
    mean = ys.mean(axis=0)
    if band == "std":
        std = ys.std(axis=0)
        return grid, mean, mean - std, mean + std
    return grid, mean, ys.min(axis=0), ys.max(axis=0)


def draw(
    groups: Sequence[tuple[str, Sequence[Curve]]],
    output: Path,
    *,
    axes: Sequence[str],
    metric: str,
    band: str,
    title: str | None,
) -> None:
    """Write the figure: one panel per x axis, one line (and band) per group."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    fig, panels = plt.subplots(1, len(axes), figsize=(6 * len(axes), 4.2), squeeze=False)
    for panel, axis in zip(panels[0], axes, strict=True):
        for i, (label, curves) in enumerate(groups):
            color = f"C{i % 10}"
            # A line needs two points; short runs are drawn as points too.
            marker = "o" if max(len(c.y) for c in curves) < 20 else ""
            if len(curves) == 1:
                c = curves[0]
                panel.plot(c.xs[axis], c.y, color=color, label=label, marker=marker)
                continue
            grid, mean, low, high = _mean_band(curves, axis, band)
            panel.plot(
                grid, mean, color=color, label=label, marker=marker if len(grid) == 1 else ""
            )
            panel.fill_between(grid, low, high, color=color, alpha=0.25, linewidth=0)
        panel.set_xlabel(X_AXES[axis][1])
        panel.set_ylabel(metric)
        panel.grid(True, alpha=0.3)
    panels[0][0].legend(loc="best", fontsize="small")
    spread = "min-max" if band == "minmax" else "±1 std"
    seeds = any(len(curves) > 1 for _, curves in groups)  # a lone run has no band
    fig.suptitle(title or (f"{metric} (mean over seeds, band: {spread})" if seeds else metric))
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return _error("matplotlib is not installed; install it with: pip install 'plangraph[plot]'")
    curves: list[Curve] = []
    for run_dir in args.run_dirs:
        curve = load_curve(run_dir, args.metric)
        if isinstance(curve, str):
            return _error(curve)
        curves.append(curve)
    by_key: dict[str, list[Curve]] = {}
    for c in curves:
        by_key.setdefault("all" if args.group else group_key(c.run_dir), []).append(c)
    groups = [(label_of([c.run_dir for c in cs]), cs) for cs in by_key.values()]
    axes = list(X_AXES) if args.x == "both" else [args.x]
    try:
        draw(groups, args.output, axes=axes, metric=args.metric, band=args.band, title=args.title)
    except OSError as exc:
        return _error(f"-o {args.output}: cannot write ({exc})")
    print(f"wrote {args.output} ({count(len(groups), 'curve')} from {count(len(curves), 'run')})")
    return 0
