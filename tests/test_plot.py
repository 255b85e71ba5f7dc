"""``plangraph plot``: learning curves of real runs, seeds drawn as mean and band."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plangraph
from plangraph.cli import main
from plangraph.commands.plot import group_key, label_of
from plangraph.runtime.run_loop import train_until
from plangraph.runtime.stopping import StopCriteria

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"num_envs_per_worker": 2, "rollout_fragment_length": 32, "train_batch_size": 128}

pytest.importorskip("matplotlib", reason="plangraph plot needs the [plot] extra (matplotlib)")


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    dirs = []
    for seed in (0, 1):
        run_dir = root / f"a2c-CartPole-v1-seed{seed}"
        algo = plangraph.build(
            plangraph.compile(ROOT / "plans" / "a2c.json", config=SMALL), seed=seed
        )
        try:
            train_until(
                algo, StopCriteria.parse([]), run_dir, max_iterations=6, show_progress=False
            )
        finally:
            algo.stop()
        dirs.append(run_dir)
    return dirs


def test_plot_writes_a_png_of_two_seeds(
    two_seeds: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import matplotlib.image

    out = tmp_path / "curves.png"
    assert main(["plot", *map(str, two_seeds), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out} (1 curve from 2 runs)"
    image = matplotlib.image.imread(out)
    assert image.shape[0] > 300 and image.shape[1] > 1000  # two panels side by side
    # Not a blank canvas: lines and a band were drawn.
    assert image[..., :3].std() > 0.05

    one = tmp_path / "time.png"
    assert main(["plot", str(two_seeds[0]), "--x", "time", "-o", str(one)]) == 0
    assert matplotlib.image.imread(one).shape[1] < image.shape[1]


def test_seeds_are_grouped_by_name_or_run_json(tmp_path: Path) -> None:
    a, b, c = tmp_path / "ppo-seed0", tmp_path / "ppo-seed1", tmp_path / "dqn-seed0"
    for d in (a, b, c):
        d.mkdir()
    assert group_key(a) == group_key(b) != group_key(c)
    assert label_of([a, b]) == "ppo (2 seeds)"
    x, y = tmp_path / "x", tmp_path / "y"
    for d, seed in ((x, 0), (y, 7)):
        d.mkdir()
        run = {"plan": "p.json", "seed": seed, "overrides": {"lr": 0.001}, "stop": {}}
        (d / "run.json").write_text(json.dumps(run))
    assert group_key(x) == group_key(y)


def test_unknown_metric_says_did_you_mean(
    two_seeds: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bad.png"
    code = main(["plot", str(two_seeds[0]), "--metric", "episode_reward_mean", "-o", str(out)])
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "--metric episode_reward_mean: no result of" in err
    assert "did you mean episode_return_mean" in err


def test_a_directory_without_results_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plot", str(tmp_path), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"plangraph plot: error: {tmp_path}: no result.jsonl with results; "
        "is it a `plangraph run` directory?"
    ]
