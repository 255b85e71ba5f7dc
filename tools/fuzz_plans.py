"""Mutation fuzzing of the compiler: random broken plans must give diagnostics, never crash.

Each mutant is made from one of the seed plans (``plans/*.json``) by a seeded mutator: keys
and values replaced, deleted, duplicated or renamed (odd ids: ``""``, ``"]"``, tab, NUL,
lone surrogates), types changed, deeply nested lists and objects inserted, huge strings and
integers (``10**5000``), long or big-integer ``${...}`` expressions, NaN/Infinity (as Python
floats in dicts and as ``NaN`` in JSON text), non-string keys; about a third are fed as JSON
*text*, mutated again character by character, so that the position-keeping JSON parser is
fuzzed too.

Size mutants set a size the plan holds (any integer param, config value or list entry)
to a value no machine can serve or no size can be: 2**63 - 1, 2**63, -(2**63), 10**9,
10**12, -1, 0, floats (1.5, 1e300, -0.0), booleans. Nesting mutants insert deeply nested
lists and objects in the plan, and pass them as a Python config override dict
(``analyze(plan, config={...})``, what a Python caller may hand the compiler).

For every mutant :func:`check` asserts the compiler's promises:

- ``plangraph.analyze`` returns (no exception escapes) within ``time_limit`` seconds of
  this process's CPU time (other jobs on the machine do not count; a slower machine does):
  past it, the mutant is a "hang";
- every diagnostic of a mutant given as JSON text has its line:col inside that text;
- every diagnostic's text encodes as UTF-8 and as ASCII with ``backslashreplace``;
- ``to_dot()`` works, its text encodes as UTF-8 and (every n-th mutant) ``dot`` accepts it;
- a clean plan also explains, serialises (``to_json``) and round-trips
  (``Plan.from_json(plan.to_json()) == plan``), and carries no non-finite number.

``--cli N`` also runs N mutants (of the same seeded stream, written to files) through
``python -m plangraph validate FILE`` in a child process: it must exit 0 or 1 (or 2 with
its usage message, for a ``--set`` value no plan can hold) without a traceback within
``time_limit`` seconds of the child's CPU time, and every ``file:line:col`` it prints must
lie inside the file.

Usage::

    .venv/bin/python tools/fuzz_plans.py --count 12000 --cli 300 --seed 0

prints a table (mutants, crashes, hangs, locations outside the file, other failures) and
the failure kinds with one example each, and exits 1 if any mutant failed.
``tests/test_compiler_fuzz.py`` runs the same check on a few thousand mutants.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plangraph.text import brief

ROOT = Path(__file__).resolve().parent.parent
PLANS_DIR = ROOT / "plans"

ODD_IDS: tuple[str, ...] = ("", "]", "a\tb", "a\x00b", "\ud800", "x\udfff", "a b", "a/b~c", "\n")
"""Ids (and strings) that have broken printing or drawing: empty, DOT/JSON-pointer
syntax, control characters, lone surrogates."""

DEPTH = 10_000
"""Nesting depth of the deep lists and objects a mutation inserts."""


def seed_plans() -> list[dict[str, Any]]:
    """The seed plans, parsed (``$schema`` dropped), in name order."""
    out = []
    for path in sorted(PLANS_DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        data.pop("$schema", None)
        out.append(data)
    return out


def _deep_list(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = [v]
    return v


def _deep_dict(depth: int) -> Any:
    v: Any = 1
    for _ in range(depth):
        v = {"k": v}
    return v


def _nasty_values(rng: random.Random, plan: dict[str, Any]) -> list[Callable[[], Any]]:
    config = plan.get("config")
    keys = [k for k in config if isinstance(k, str)] if isinstance(config, dict) else []
    keys = keys or ["x"]
    k = rng.choice(keys)
    return [
        lambda: rng.choice(ODD_IDS),
        lambda: "x" * rng.choice((10_000, 1_000_000)),
        lambda: "\ud800" + rng.choice(ODD_IDS) + "\udc00",
        lambda: 10**5000,
        lambda: -(10**5000),
        lambda: 10 ** rng.randint(18, 400),
        lambda: float("nan"),
        lambda: float("inf"),
        lambda: -float("inf"),
        lambda: 1e308,
        lambda: rng.choice((0, -1, 1, 2**63, -(2**63), 0.5, -0.0, True, False, None)),
        lambda: _deep_list(rng.choice((50, 1000, DEPTH))),
        lambda: _deep_dict(rng.choice((50, 1000, DEPTH))),
        lambda: [],
        lambda: {},
        lambda: {rng.choice((1, None, 2.5)): 1},
        lambda: "${" + "*".join([k] * rng.choice((10, 200, 5000))) + "}",
        lambda: "${" + "+".join(["1"] * rng.choice((1000, 100_000))) + "}",
        lambda: "${" + "(" * rng.choice((100, 1000, 10_000)) + "1" + ")" * 1000 + "}",
        lambda: "${" + "-" * rng.choice((100, 10_000)) + "1}",
        lambda: "${" + "9" * rng.choice((400, 5000, 100_000)) + "}",
        lambda: "${" + rng.choice(("1e308*10", "1e308+1e308", "-1e308*10", "1/0", "0/0")) + "}",
        lambda: (
            "${" + rng.choice(("int(1e308)", "float(" + "9" * 400 + ")", "ceil(1e308*10)")) + "}"
        ),
        lambda: "${" + rng.choice(("min()", "max(1)", "abs(1,2)", "x(1)", "a.b", "a[0]")) + "}",
        lambda: "${" + f"{k}*{k}" * 1 + "*" + "9" * 2000 + "}",
        lambda: "${" + f"floor({k}) % 0" + "}",
        lambda: f"${{{k}}}",
        lambda: "@" + rng.choice(("workers", "replay", "nope", "")),
        lambda: "$" + "{" * 3 + "}",
        lambda: [
            [rng.randint(-5, 5) * 1000, rng.choice((0.1, -0.1, float("nan")))] for _ in range(3)
        ],
        lambda: [[rng.randint(0, 10) * 100, 0.001] for _ in range(rng.randint(0, 4))],
    ]


SIZES: tuple[Any, ...] = (
    2**63 - 1,
    2**63,
    -(2**63),
    10**9,
    10**12,
    -1,
    0,
    1.5,
    1e300,
    -0.0,
    True,
    "1e9",
)
"""What a size mutant writes in place of an integer: too large for any machine, beyond
64 bits, negative, zero, or not an integer at all."""


def _int_spots(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, Any]]:
    """``(container, key)`` of every integer inside ``value`` (a size, count or index)."""
    if isinstance(value, dict):
        items: Any = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return
    if len(path) > 8:
        return
    for k, v in items:
        if isinstance(v, int) and not isinstance(v, bool):
            yield value, k
        else:
            yield from _int_spots(v, (*path, k))


def mutate_sizes(plan: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of ``plan`` with one to three of its integers replaced by :data:`SIZES`."""
    plan = copy.deepcopy(plan)
    spots = list(_int_spots(plan))
    for _ in range(rng.randint(1, 3)):
        if not spots:
            break
        box, key = rng.choice(spots)
        box[key] = rng.choice(SIZES)
    return plan


def nested_config(plan: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A Python config override dict for ``plan`` with a deeply nested value (or one
    beyond the bounds) under one of its config keys or a dotted param path."""
    config = plan.get("config") if isinstance(plan.get("config"), dict) else {}
    keys = [k for k in config if isinstance(k, str)] or ["x"]
    nodes = [n for n in plan.get("nodes", {}) if isinstance(n, str)] or ["n"]
    key = rng.choice((*keys, f"nodes.{rng.choice(nodes)}.x", f"{rng.choice(nodes)}.params"))
    depth = rng.choice((63, 64, 65, 100, 1000, DEPTH, 100_000))
    value = rng.choice(
        (
            lambda: _deep_list(depth),
            lambda: _deep_dict(depth),
            lambda: {"a": [{"b": _deep_list(depth)}]},
            lambda: rng.choice(SIZES),
            lambda: [rng.choice(SIZES)] * rng.choice((1, 1000)),
            lambda: {rng.choice((1, None, 2.5, "k")): _deep_dict(depth)},
        )
    )()
    return {key: value}


def _containers(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every dict/list inside ``value`` with its path, down to depth 8 (below that only
    the deep values a mutation inserted, not worth mutating again)."""
    if len(path) > 8:
        return
    if isinstance(value, dict):
        yield path, value
        for k, v in list(value.items()):
            yield from _containers(v, (*path, k))
    elif isinstance(value, list):
        yield path, value
        for i, v in enumerate(value):
            yield from _containers(v, (*path, i))


def mutate(plan: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of ``plan`` with one to three random mutations."""
    plan = copy.deepcopy(plan)
    for _ in range(rng.randint(1, 3)):
        spots = list(_containers(plan))
        _path, box = rng.choice(spots)
        values = _nasty_values(rng, plan)
        if isinstance(box, dict):
            if not box:
                box[rng.choice(ODD_IDS)] = rng.choice(values)()
                continue
            key = rng.choice(list(box))
            op = rng.randrange(7)
            if op == 0:
                box[key] = rng.choice(values)()
            elif op == 1:
                del box[key]
            elif op == 2:  # duplicate under an odd name (an odd node/resource id)
                box[rng.choice((*ODD_IDS, f"{key}2"))] = box[key]  # shared: may be deep
            elif op == 3:  # rename
                box[rng.choice((*ODD_IDS, 12, None))] = box.pop(key)
            elif op == 4:  # change the type
                v = box[key]
                box[key] = (
                    ([v] if not isinstance(v, list) else {"0": v})
                    if rng.random() < 0.5
                    else brief(v)[:100]
                )
            elif op == 5:  # point an id field at an odd id
                box[key] = rng.choice(ODD_IDS) if rng.random() < 0.5 else [rng.choice(ODD_IDS)]
            else:
                box[rng.choice((1, None, 2.5, *ODD_IDS))] = rng.choice(values)()
        else:
            if not box:
                box.append(rng.choice(values)())
                continue
            i = rng.randrange(len(box))
            op = rng.randrange(4)
            if op == 0:
                box[i] = rng.choice(values)()
            elif op == 1:
                del box[i]
            elif op == 2:
                box.insert(i, box[i])
            else:
                box.reverse()
    return plan


def _dumps(value: Any, rng: random.Random) -> str:
    """JSON text of ``value``; NaN/Infinity written as Python's json does; deep values
    (which ``json.dumps`` cannot recurse into) as text of the same shape."""
    try:
        return json.dumps(value, indent=rng.choice((None, 2)), ensure_ascii=rng.random() < 0.5)
    except (RecursionError, ValueError, TypeError):
        return "{}"


def mutate_text(text: str, rng: random.Random) -> str:
    """``text`` with a few character-level edits (the JSON parser's input)."""
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(text) + 1)
        op = rng.randrange(9)
        if op == 0:
            text = text[:pos] + text[pos + rng.randint(1, 5) :]
        elif op == 1:
            text = text[:pos] + rng.choice(list('{}[],:"\\ \n0-eE.tfn')) + text[pos:]
        elif op == 2:
            text = text[:pos]
        elif op == 3:
            text = text[:pos] + rng.choice(("NaN", "-Infinity", "Infinity", "1e999")) + text[pos:]
        elif op == 4:
            n = rng.choice((100, 1000, DEPTH, 100_000))
            text = text[:pos] + "[" * n + "]" * n + text[pos:]
        elif op == 5:
            n = rng.choice((1000, DEPTH))
            text = text[:pos] + '{"a":' * n + "1" + "}" * n + text[pos:]
        elif op == 6:
            text = (
                text[:pos] + rng.choice(('"\\ud800"', "\ud800", "\x00", '"\\u0000"')) + text[pos:]
            )
        elif op == 7:
            text = text[:pos] + "9" * rng.choice((400, 5000, 100_000)) + text[pos:]
        else:
            text = text[:pos] + '"' + "x" * rng.choice((10, 100_000)) + '"' + text[pos:]
    return text


def _deep_text(rng: random.Random, seed: dict[str, Any]) -> str:
    """Seed text with a deeply nested value spliced in as a param (valid JSON)."""
    n = rng.choice((1000, DEPTH, 100_000))
    inner = rng.choice(("[" * n + "]" * n, '{"a":' * n + "1" + "}" * n))
    text = json.dumps(seed)
    return text.replace('"params": {', '"params": {"deep": ' + inner + ", ", 1)


@dataclass(frozen=True)
class WithConfig:
    """A mutant that is a plan and the Python config override dict it is analysed with."""

    plan: dict[str, Any]
    config: dict[str, Any]


def mutants(count: int, seed: int = 0) -> Iterator[Any]:
    """``count`` seeded mutants: JSON-form dicts, JSON text (a ``str``), or a plan with a
    config override dict (:class:`WithConfig`)."""
    rng = random.Random(seed)
    seeds = seed_plans()
    for _ in range(count):
        base = rng.choice(seeds)
        r = rng.random()
        if r < 0.4:
            yield mutate(base, rng)
        elif r < 0.6:
            text = _dumps(mutate(base, rng), rng)
            yield mutate_text(text, rng) if rng.random() < 0.5 else text
        elif r < 0.68:
            yield mutate_text(_dumps(base, rng), rng)
        elif r < 0.75:
            yield _deep_text(rng, base)
        elif r < 0.85:  # sizes, as a dict or as JSON text (located diagnostics)
            sized = mutate_sizes(base, rng)
            yield sized if rng.random() < 0.5 else _dumps(sized, rng)
        elif r < 0.93:
            yield WithConfig(base, nested_config(base, rng))
        else:
            yield WithConfig(mutate_sizes(base, rng), nested_config(base, rng))


@dataclass(frozen=True)
class Failure:
    kind: str
    detail: str


class _Timeout(BaseException):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_non_finite(v) for v in value)
    if hasattr(value, "model_dump"):
        return _non_finite(value.model_dump())
    return False


def check(
    source: Any, time_limit: float = 5.0, hang_limit: float = 30.0, dot: str | None = None
) -> list[Failure]:
    """The broken promises of the compiler on ``source`` (a dict or JSON text); [] if none.

    ``hang_limit``: seconds after which analysis is interrupted (SIGALRM, main thread only)
    and reported as a hang. ``dot``: path of Graphviz's ``dot``, to check that it accepts
    the DOT text (``dot -Tsvg``).
    """
    import plangraph
    from plangraph.ir.plan import Plan

    fails: list[Failure] = []
    config = source.config if isinstance(source, WithConfig) else None
    plan = source.plan if isinstance(source, WithConfig) else source
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_limit)
    t0 = time.process_time()
    try:
        compiled = plangraph.analyze(plan, config)
    except _Timeout:
        return [Failure("hang", f"analysis interrupted after {hang_limit} s")]
    except Exception as exc:  # the point: nothing may escape
        return [Failure(f"analyze raised {type(exc).__name__}", _short(exc))]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    took = time.process_time() - t0
    if took > time_limit:
        fails.append(Failure("hang", f"{took:.1f} s of CPU (over {time_limit:g} s)"))
    if isinstance(plan, str):
        for d in compiled.diagnostics:
            outside = outside_text(plan, d.location)
            if outside is not None:
                fails.append(Failure("location outside the file", f"{d.code}: {outside}"))
    for d in compiled.diagnostics:
        try:
            text = d.format()
            text.encode("utf-8")
            text.encode("ascii", "backslashreplace")
            json.dumps(d.to_dict(), ensure_ascii=False).encode("utf-8")
        except Exception as exc:
            fails.append(Failure(f"diagnostic {d.code} unprintable", _short(exc)))
    try:
        dot_text = plangraph.to_dot(compiled).encode("utf-8")
    except Exception as exc:
        fails.append(Failure(f"to_dot raised {type(exc).__name__}", _short(exc)))
    else:
        if dot is not None:
            run = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, timeout=60)
            if run.returncode != 0:
                fails.append(
                    Failure("dot rejects the DOT", _short(run.stderr.decode(errors="replace")))
                )
    if compiled.ok:
        for what, fn in (
            ("explain", lambda: compiled.explain().encode("utf-8")),
            ("to_json", lambda: compiled.to_json().encode("utf-8")),
            ("round trip", lambda: _round_trip(compiled.plan, Plan)),
        ):
            try:
                fn()
            except Exception as exc:
                fails.append(
                    Failure(f"clean plan: {what} raised {type(exc).__name__}", _short(exc))
                )
        params = [n.params for n in compiled.nodes.values()]
        params += [r.params for r in compiled.resources.values()]
        if any(_non_finite(p) for p in params):
            fails.append(Failure("clean plan carries a non-finite number", ""))
    return fails


def outside_text(text: str, location: Any) -> str | None:
    """Why ``location`` (line, 1-based col) is not a place in ``text``, or None if it is
    (or if there is none). A column may be one past a line's last character (its end)."""
    if location is None or location.line is None:
        return None
    lines = text.split("\n")
    if not 1 <= location.line <= len(lines):
        return f"line {location.line} of a {len(lines)}-line text"
    if location.col is not None and not 1 <= location.col <= len(lines[location.line - 1]) + 1:
        width = len(lines[location.line - 1])
        return f"{location.line}:{location.col}, a line of {width} characters"
    return None


def _round_trip(plan: Any, plan_cls: Any) -> None:
    if plan_cls.from_json(plan.to_json()) != plan:
        raise AssertionError("Plan.from_json(plan.to_json()) != plan")


def _short(exc: BaseException) -> str:
    return ascii(str(exc))[:200]


def run(
    count: int, seed: int, time_limit: float = 5.0, dot_every: int = 0
) -> tuple[Counter[str], dict[str, str]]:
    """Check ``count`` mutants; ``(failures by kind, one example detail per kind)``.

    ``dot_every``: also run Graphviz ``dot`` on every n-th mutant's DOT (0: never; skipped
    when ``dot`` is not on PATH)."""
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    dot = shutil.which("dot") if dot_every else None
    for i, m in enumerate(mutants(count, seed)):
        use_dot = dot if dot is not None and i % dot_every == 0 else None
        for f in check(m, time_limit, dot=use_dot):
            kinds[f.kind] += 1
            examples.setdefault(f.kind, f"mutant {i}: {f.detail}")
    return kinds, examples


_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?: (?:error|warning) PG\d+ ")


def _cli_input(mutant: Any, rng: random.Random) -> tuple[bytes, list[str]]:
    """The plan file's bytes and the extra ``validate`` arguments for ``mutant``: a config
    override dict becomes ``--set KEY=JSON`` (deep values as nested brackets, which
    ``json.dumps`` cannot write; at most 100,000 characters, under the OS's limit of one
    argument)."""
    plan = mutant.plan if isinstance(mutant, WithConfig) else mutant
    text = plan if isinstance(plan, str) else _dumps(plan, rng)
    args: list[str] = []
    if isinstance(mutant, WithConfig):
        for key in mutant.config:
            # 15,000 levels of '{"a":' are 75,000 characters: under the OS's 128 KiB limit.
            depth = rng.choice((63, 64, 65, 1000, 15_000))
            value = rng.choice(
                ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "9" * 5000)
            )
            args += ["--set", f"{key}={value}"]
    return text.encode("utf-8", "surrogatepass"), args


def check_cli(
    mutant: Any, rng: random.Random, directory: Path, time_limit: float = 5.0
) -> list[Failure]:
    """The broken promises of ``plangraph validate`` on ``mutant`` (run in a child
    process); [] if none. A child past ``time_limit`` s of CPU (its own, measured with
    ``getrusage``) is a hang; one killed after 60 s of wall time too."""
    data, args = _cli_input(mutant, rng)
    path = directory / "mutant.json"
    path.write_bytes(data)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "plangraph", "validate", str(path), *args],
            capture_output=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return [Failure("cli: hang", "killed after 60 s of wall time")]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    fails = []
    stderr = done.stderr.decode("utf-8", "replace")
    # 0 clean, 1 diagnostics, 2 a usage error the command explains (a --set value no plan
    # can hold); anything else, or a traceback, is a crash.
    usage = done.returncode == 2 and "plangraph validate: error:" in stderr
    if (done.returncode not in (0, 1) and not usage) or "Traceback" in stderr:
        fails.append(Failure("cli: crash", f"exit {done.returncode}: {stderr[-200:]!r}"))
    if cpu > time_limit:
        fails.append(Failure("cli: hang", f"{cpu:.1f} s of CPU (over {time_limit:g} s)"))
    text = data.decode("utf-8", "replace")
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        m = _LOCATED.match(line)
        if m is None or m["file"] != str(path):
            continue
        where = Location(None, int(m["line"]), int(m["col"]) if m["col"] else None)
        outside = outside_text(text, where)
        if outside is not None:
            fails.append(Failure("cli: location outside the file", outside))
    return fails


@dataclass(frozen=True)
class Location:
    """A diagnostic's ``line`` and ``col`` as the CLI prints them."""

    file: str | None
    line: int
    col: int | None


def run_cli(count: int, seed: int, time_limit: float = 5.0) -> tuple[Counter[str], dict[str, str]]:
    """Check the first ``count`` mutants of seed ``seed`` through the CLI."""
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    rng = random.Random(seed + 1)  # the CLI arguments: a stream of their own
    with tempfile.TemporaryDirectory(prefix="fuzz_cli_") as tmp:
        for i, m in enumerate(mutants(count, seed)):
            for f in check_cli(m, rng, Path(tmp), time_limit):
                kinds[f.kind] += 1
                examples.setdefault(f.kind, f"mutant {i}: {f.detail}")
    return kinds, examples


def table(rows: list[tuple[str, int, Counter[str]]]) -> str:
    """The results table: per run (API, CLI) its mutants, crashes, hangs, locations outside
    the file and other failures."""

    def count(kinds: Counter[str], word: str) -> int:
        return sum(n for k, n in kinds.items() if word in k)

    lines = [f"{'run':<5} {'mutants':>8} {'crashes':>8} {'hangs':>6} {'outside':>8} {'other':>6}"]
    for name, n, kinds in rows:
        crashes = count(kinds, "raised") + count(kinds, "crash")
        hangs = count(kinds, "hang")
        outside = count(kinds, "outside")
        other = sum(kinds.values()) - crashes - hangs - outside
        lines.append(f"{name:<5} {n:>8} {crashes:>8} {hangs:>6} {outside:>8} {other:>6}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000, help="mutants to check")
    ap.add_argument("--cli", type=int, default=0, help="mutants to check through the CLI too")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--time-limit", type=float, default=5.0, help="CPU s per analysis: past it, a hang"
    )
    ap.add_argument("--dot-every", type=int, default=10, help="run dot on every n-th (0: off)")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    t0 = time.perf_counter()
    kinds, examples = run(args.count, args.seed, args.time_limit, args.dot_every)
    rows = [("api", args.count, Counter(kinds))]
    if args.cli:
        cli_kinds, cli_examples = run_cli(args.cli, args.seed, args.time_limit)
        rows.append(("cli", args.cli, cli_kinds))
        kinds += cli_kinds
        examples = {**cli_examples, **examples}
    took = time.perf_counter() - t0
    print(f"seed {args.seed}: {args.count} mutants through the API, {args.cli} through the CLI, ")
    print(f"in {took:.1f} s; hang: over {args.time_limit:g} s of CPU")
    print(table(rows), end="")
    if not kinds:
        print("no failures")
        return 0
    print(f"{'count':>6}  failure (first example)")
    for kind, n in kinds.most_common():
        print(f"{n:>6}  {kind}  ({examples[kind]})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
