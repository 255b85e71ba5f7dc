"""The documentation site (``mkdocs.yml``, ``docs/``) and the README cannot drift from the code.

* The generated pages (``tools/gen_docs.py``) are current, and the reference pages list
  exactly what the registries hold: every built-in operator, resource kind, algorithm and
  model type, every command of the CLI with every option, every diagnostic code and every
  result key. Every plan of ``plans/`` has its page, with its diagram, in the nav.
* The README is at most 250 lines and its links resolve; so do the site's relative links.
* Every code block on the site is run, parsed, or marked illustrative
  (``tests/docs_pages.py`` says how): the marked examples of this module's pages run here
  (``docs/extending.md``'s in ``test_docs_extending.py``), each in a temporary directory
  that holds the checkout's ``plans/`` (users run them in a checkout), on the session's
  Ray where they train, with small budgets (a page's command that trains to a stop
  criterion runs here from Python, for 2 iterations); every ``plangraph`` command line in
  a ``bash`` block, or after a ``$`` prompt in an output block, parses with the CLI's own
  parser, and the ``validate`` ones run; an option the running text gives a command is one
  of that command's.
* ``mkdocs build --strict`` passes and the built site has its search index (skipped where the
  ``docs`` extra is not installed; ``.ci/run`` builds it too).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import re
import runpy
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.docs_pages import (
    DOCS,
    ROOT,
    Block,
    blocks,
    example_page,
    examples,
    is_generated,
    site_pages,
)

README = ROOT / "README.md"
REFERENCE = DOCS / "reference"


def headings(page: Path, level: str = "## ") -> list[str]:
    return [
        line[len(level) :].strip()
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith(level)
    ]


def section(page: Path, heading: str) -> str:
    """The text of ``page`` under ``## heading``, up to the next ``## ``."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_generated_pages_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{done.stdout}{done.stderr[-2000:]}\nthe generated docs are stale: run "
        ".venv/bin/python tools/gen_docs.py"
    )


def test_the_reference_lists_every_registered_operator_resource_algorithm_and_model() -> None:
    from plangraph.ops import all_ops, all_resource_kinds
    from plangraph.ops.algorithms import algorithms
    from plangraph.ops.models import model_types

    # Built-ins only: a test before this one may have registered its own.
    assert set(headings(REFERENCE / "operators.md")) == {
        n for n, s in all_ops().items() if s.builtin
    }
    assert set(headings(REFERENCE / "resources.md")) == {
        n
        for n, k in all_resource_kinds().items()
        if k.params_model.__module__.startswith("plangraph.")
    }
    assert set(headings(REFERENCE / "algorithms.md")) == {
        n for n, s in algorithms().items() if s.builtin
    }
    assert set(headings(REFERENCE / "models.md")) == {
        n for n, s in model_types().items() if s.builtin
    }
    for name, spec in algorithms().items():
        if spec.builtin:  # every setting of every algorithm, by name
            text = section(REFERENCE / "algorithms.md", name)
            assert all(f"| `{f}` |" in text for f in spec.config.model_fields), name


def test_the_reference_lists_every_command_and_option() -> None:
    from plangraph.cli import COMMANDS, build_parser

    page = REFERENCE / "cli.md"
    assert headings(page) == [f"plangraph {c}" for c in COMMANDS]
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        text = section(page, f"plangraph {name}")
        for action in sub.choices[name]._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in text, (name, option)


def test_the_reference_lists_every_diagnostic_code_and_result_key() -> None:
    from plangraph.compiler.diagnostics import CODES
    from plangraph.runtime.result import RESULT_KEYS

    documented = [h.split()[0] for h in headings(REFERENCE / "diagnostics.md")]
    assert documented == sorted(CODES)
    for code, (name, _severity, _meaning) in CODES.items():
        assert f"## {code} {name}" in (REFERENCE / "diagnostics.md").read_text(encoding="utf-8")
    keys = re.findall(r"^\| `([a-z_]+)` \|", (REFERENCE / "results.md").read_text(), re.M)
    assert set(keys) == RESULT_KEYS


def test_every_plan_has_its_page_with_its_diagram_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    plans = sorted(p.stem for p in (ROOT / "plans").glob("*.json"))
    assert plans
    for name in plans:
        page = DOCS / "algorithms" / f"{name}.md"
        assert page.exists(), name
        assert f"](../diagrams/{name}.png)" in page.read_text(encoding="utf-8"), name
        assert (DOCS / "diagrams" / f"{name}.png").exists(), name
        assert f"algorithms/{name}.md" in nav, name


_LINK = re.compile(r"\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")


def _slug(heading: str) -> str:
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file, or whose anchor in a page, is missing."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code is not links
    bad = []
    for m in _LINK.finditer(text):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            bad.append(target)
        elif frag and resolved.suffix == ".md" and "\n::: " not in resolved.read_text():
            # (a page of mkdocstrings directives: its anchors are the objects' paths, which
            # mkdocs build --strict checks)
            lines = resolved.read_text(encoding="utf-8").splitlines()
            anchors = {_slug(line.lstrip("#")) for line in lines if line.startswith("#")}
            if frag not in anchors:
                bad.append(target)
    return bad


def test_the_readme_is_short_and_its_links_resolve() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    assert broken_links(README) == []
    assert "docs/guide/" in README.read_text(encoding="utf-8")  # it points into the site


def test_contributing_stands_on_its_own_and_points_at_the_concepts() -> None:
    page = ROOT / "CONTRIBUTING.md"
    text = page.read_text(encoding="utf-8")
    assert broken_links(page) == []
    assert "../" not in text  # no required reading outside the repository
    assert "docs/ARCHITECTURE.md" in text and "docs/CONTRACTS.md" in text


def test_the_sites_relative_links_resolve() -> None:
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in site_pages()} == {
        str(p.relative_to(ROOT)): [] for p in site_pages()
    }


def command_lines(block: Block) -> list[list[str]]:
    """The ``plangraph`` command lines of a block: each as argv, without the program."""
    out = []
    # A shell line continued with a trailing backslash is one command.
    for raw in block.text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if block.lang != "bash":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        for part in line.split("&&"):
            argv = shlex.split(part, comments=True)
            if argv and argv[0].rsplit("/", 1)[-1] == "plangraph":
                out.append(argv[1:])
    return out


def all_blocks() -> list[Block]:
    return [b for page in site_pages() if not is_generated(page) for b in blocks(page)]


def test_every_python_and_json_block_is_an_example_or_marked_illustrative() -> None:
    unmarked = [b.where for b in all_blocks() if b.lang in ("python", "json") and not b.marker]
    assert unmarked == [], "mark each as <!-- example: ... --> or <!-- illustrative -->"
    examples()  # raises if an example is spread over two pages


def test_every_command_on_the_site_parses_and_the_validate_commands_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from plangraph.cli import build_parser, main

    monkeypatch.chdir(ROOT)
    checked = ran = 0
    for block in all_blocks():
        if block.marker == "<!-- illustrative -->":
            continue
        for argv in command_lines(block):
            if any("..." in a or a.isupper() for a in argv):
                continue  # a synopsis (PLAN, RUN_DIR ...), not a command
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    build_parser(argv[0]).parse_args(argv)
            except SystemExit:
                pytest.fail(f"{block.where}: plangraph {shlex.join(argv)}: {err.getvalue()}")
            checked += 1
            if argv[0] == "validate" and all(
                (ROOT / a).exists() for a in argv[1:] if not a.startswith("-")
            ):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    assert main(argv) == 0, f"{block.where}: {out.getvalue()}"
                ran += 1
    assert checked >= 10 and ran >= 2


def test_the_tools_the_benchmarks_page_names_exist() -> None:
    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    tools = set(re.findall(r"tools/[\w]+\.py", text))
    assert tools and all((ROOT / t).exists() for t in tools), tools


def test_the_authoring_example_is_one_plan_in_python_and_json(tmp_path: Path) -> None:
    import plangraph

    assert example_page("a2c_plan") == DOCS / "guide" / "authoring.md"
    files = examples()["a2c_plan"]
    for name, source in files.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    from_py = plangraph.compile(tmp_path / "a2c_plan.py")
    from_json = plangraph.compile(tmp_path / "a2c_plan.json")
    assert json.loads(from_py.plan.to_json()) == json.loads(from_json.plan.to_json())
    # The README shows the same Python plan.
    assert examples()["readme_plan"]["plan.py"] == files["a2c_plan.py"]


def write_example(name: str, directory: Path) -> dict[str, Path]:
    """The files of example ``name`` written into ``directory``, by file name."""
    paths = {}
    for file, source in examples()[name].items():
        paths[file] = directory / file
        paths[file].write_text(source, encoding="utf-8")
    return paths


@pytest.fixture
def in_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``, the current directory, with the checkout's ``plans/`` in it: the
    examples name plans by their path in a checkout, and write where they run."""
    (tmp_path / "plans").symlink_to(ROOT / "plans", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.usefixtures("ray_session")
def test_the_python_api_example_trains_saves_restores_and_evaluates(
    in_checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert example_page("python_api") == DOCS / "guide" / "authoring.md"
    files = write_example("python_api", in_checkout)
    ns = runpy.run_path(str(files["train.py"]), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert "plan 'ppo': 4 nodes, 1 resource, output 'metrics' (Result)" in lines  # explain()
    # algo.run stopped at max_iterations=3 (a return of 475 is far): 3 batches of 2048
    assert "6144" in lines
    assert (in_checkout / "ckpt" / "algorithm.json").exists()
    result = ns["result"]  # the restored run's next iteration
    assert result["iteration"] == 4 and result["num_env_steps_sampled"] == 4 * 2048
    assert result["evaluation"]["episode_len_mean"] <= 200  # make_env's time limit
    actions = ns["actions"]
    assert actions.shape == (3,) and actions.dtype == np.int64
    # the checkpoint's policy (iteration 3's weights), without Ray
    (last,) = [x for x in lines if re.match(r"\[[01] [01] [01]\] \{'episode_return_mean'", x)]
    assert "'episodes': 10" in last


@pytest.mark.usefixtures("ray_session")
def test_the_tune_example_sweeps_two_learning_rates_into_run_directories(
    in_checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray.tune", reason="the example needs the [tune] extra (ray[tune])")
    assert example_page("tune_sweep") == DOCS / "guide" / "loggers.md"
    # As in a fresh process: unset (restored afterwards); trainable() sets it.
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "")
    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS")
    files = write_example("tune_sweep", in_checkout)
    ns = runpy.run_path(str(files["sweep.py"]), run_name="__main__")
    assert ns["results"].errors == [] and len(ns["results"]) == 2
    trials = sorted(p for p in (in_checkout / "runs" / "lr-sweep").iterdir() if p.is_dir())
    assert len(trials) == 2
    rates = set()
    for trial in trials:  # each a run directory, as plangraph run writes one
        overrides = json.loads((trial / "run.json").read_text(encoding="utf-8"))["overrides"]
        assert overrides["num_workers"] == 1 and overrides["train_batch_size"] == 512
        rates.add(overrides["lr"])
        results = [json.loads(x) for x in (trial / "result.jsonl").read_text().splitlines()]
        assert [r["iteration"] for r in results] == [1, 2]
        assert [r["num_env_steps_sampled"] for r in results] == [512, 1024]
        with (trial / "progress.csv").open(encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        # one writer: no row of Tune's own logger appended under plangraph's header
        assert [r["iteration"] for r in rows] == ["1", "2"]
        assert all(None not in r and None not in r.values() for r in rows)
        assert list(trial.glob("checkpoint_*/algorithm.json"))
    assert rates == {1e-3, 3e-4}


@pytest.fixture
def own_recurrent(in_checkout: Path) -> Iterator[dict[str, Any]]:
    """``my_gru.py`` of the example, run (it registers ``my_gru``); unregistered after."""
    from plangraph.ops.models import model_types, unregister_model

    assert example_page("own_recurrent") == DOCS / "recurrent.md"
    assert "my_gru" not in model_types()
    files = write_example("own_recurrent", in_checkout)
    try:
        yield runpy.run_path(str(files["my_gru.py"]), run_name="my_gru")
    finally:
        if "my_gru" in model_types():
            unregister_model("my_gru")


@pytest.mark.usefixtures("ray_session")
def test_the_own_recurrent_example_trains_the_users_gru_in_ppo_lstm(
    own_recurrent: dict[str, Any],
) -> None:
    import plangraph

    # What the page's command runs (plangraph run plans/ppo_lstm.json --import my_gru.py
    # --set 'model={"type": "my_gru"}'), from Python as the page says, for 2 iterations
    # of one SGD epoch each (the plan's 6 would only make the test longer).
    config = {"model": {"type": "my_gru"}, "num_sgd_iter": 1}
    compiled = plangraph.compile("plans/ppo_lstm.json", config=config)
    with plangraph.build(compiled, seed=0) as algo:
        assert len(algo.ctx.worker_sets["workers"].remote_workers) == 2
        policy = algo.policy
        assert isinstance(policy.model.pi_encoder, own_recurrent["MyGRU"])
        assert policy.is_recurrent and policy.max_seq_len == 10  # GRUSettings' defaults
        assert sorted(policy.initial_state(2)) == ["state_in_h"]
        before = policy.get_weights()
        results = [algo.train() for _ in range(2)]
        after = policy.get_weights()
        evaluation = algo.evaluate(2)
    assert [r["num_env_steps_trained"] for r in results] == [1024, 2048]
    assert np.isfinite(results[-1]["learner"]["total_loss"])
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert evaluation["episode_len_mean"] >= 1


@pytest.mark.usefixtures("ray_session")
def test_the_record_plan_example_records_the_env_steps_it_trains_on(in_checkout: Path) -> None:
    import plangraph
    from plangraph.rl.offline import inspect_dataset

    assert example_page("record_plan") == DOCS / "offline.md"
    files = write_example("record_plan", in_checkout)
    # What the page's `plangraph run ppo_record.py --max-iterations 2` runs.
    with plangraph.build(plangraph.compile(files["ppo_record.py"]), seed=0) as algo:
        results = [algo.train() for _ in range(2)]
    assert [r["num_env_steps_trained"] for r in results] == [1024, 2048]
    assert results[-1]["counters"]["num_env_steps_recorded"] == 2048
    data = in_checkout / "datasets" / "run1"  # relative to where the run started
    info = inspect_dataset(str(data))
    assert info.num_rows == 2048 and info.files
    meta = json.loads((data / "metadata.json").read_text(encoding="utf-8"))
    assert meta["plan"]["name"] == "ppo_record" and meta["env"] == "CartPole-v1"


def test_mkdocs_builds_the_site_strictly_with_search(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    pytest.importorskip("mkdocstrings", reason="the docs extra is not installed")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert {"reference/operators/", "algorithms/ppo/", "extending/"} <= locations


def test_the_options_the_prose_gives_a_command_are_that_commands() -> None:
    """`plangraph CMD ... --opt` in running text: CMD is a command and --opt its option (a
    page once said every command takes --import; `plangraph diff` does not)."""
    from plangraph.cli import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    options = {c: {o for a in sub.choices[c]._actions for o in a.option_strings} for c in COMMANDS}
    wrong, seen = [], 0
    for page in site_pages():
        if is_generated(page):
            continue
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for m in re.finditer(r"`(?:\.venv/bin/)?plangraph ([a-z]+)((?: [^`]*)?)`", text):
            command, rest = m.group(1), m.group(2)
            if command not in COMMANDS:
                wrong.append(f"{page.name}: {m.group(0)}")
                continue
            for option in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", rest):
                seen += 1
                if option not in options[command]:
                    wrong.append(f"{page.name}: {m.group(0)}: {option}")
    assert wrong == []
    assert seen >= 20
