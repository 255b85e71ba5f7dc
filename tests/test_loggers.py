"""``--logger mlflow`` and ``--logger wandb``: a real run's metrics, read back with each
library's own reader (local MLflow store; W&B offline, no network)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import plangraph
from plangraph.runtime.loggers import logger_problem
from plangraph.runtime.metric_tags import metric_tags
from plangraph.runtime.run_loop import train_until
from plangraph.runtime.stopping import StopCriteria

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--set", "num_envs_per_worker=2", "--set", "rollout_fragment_length=16",
         "--set", "train_batch_size=64"]  # fmt: skip


def test_run_with_the_mlflow_logger_is_read_back_by_mlflows_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow", reason="--logger mlflow needs the [mlflow] extra")
    # MLflow 3 opens a local file store only when told (the run itself sets it).
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "plangraph", "run", str(ROOT / "plans" / "a2c.json"), *SMALL,
         "--max-iterations", "3", "--seed", "2", "--out", str(run_dir), "--no-progress",
         "--logger", "mlflow", "--experiment", "obs-test"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((run_dir / "mlflow_run.json").read_text())
    assert record["uri"] == f"file:{(run_dir / 'mlruns').resolve()}"

    client = MlflowClient(tracking_uri=record["uri"])
    run = client.get_run(record["run_id"])
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "obs-test"
    assert run.data.params["seed"] == "2"
    assert json.loads(run.data.params["overrides.train_batch_size"]) == 64
    history = client.get_metric_history(run.info.run_id, "counters/num_env_steps_sampled")
    assert [(m.step, m.value) for m in history] == [(64, 64.0), (128, 128.0), (192, 192.0)]
    last = json.loads((run_dir / "result.jsonl").read_text().splitlines()[-1])
    # Every tag TensorBoard gets, with the same last value.
    assert run.data.metrics == pytest.approx(metric_tags(last))


def test_a_missing_logger_library_is_named_before_anything_starts() -> None:
    problem = logger_problem(["mlflow", "wandb"])
    import importlib.util

    if importlib.util.find_spec("mlflow") is None:
        assert problem == (
            "--logger mlflow: mlflow is not installed; pip install 'plangraph[mlflow]'"
        )
    elif importlib.util.find_spec("wandb") is None:
        assert problem == "--logger wandb: wandb is not installed; pip install 'plangraph[wandb]'"
    else:
        assert problem is None
    assert logger_problem(["neptune"]) == "--logger neptune: unknown; choose from mlflow, wandb"


def test_wandb_logger_writes_an_offline_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb", reason="--logger wandb needs the [wandb] extra")
    from plangraph.runtime.loggers import WandbLogger

    monkeypatch.delenv("WANDB_MODE", raising=False)  # the default must be offline
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 64}
    algo = plangraph.build(plangraph.compile(ROOT / "plans" / "a2c.json", config=config), seed=0)
    logger = WandbLogger(tmp_path, project="obs-test", settings={"seed": 0})
    try:
        train_until(
            algo,
            StopCriteria.parse([]),
            tmp_path,
            max_iterations=2,
            show_progress=False,
            loggers=[logger],
        )
    finally:
        algo.stop()
    (offline,) = (tmp_path / "wandb").glob("offline-run-*")
    (events,) = offline.glob("run-*.wandb")
    # wandb >= 0.2x keeps no Python reader of its offline log (the Go core writes it;
    # `wandb sync` uploads it): the records hold each tag name and the run's config.
    data = events.read_bytes()
    last = json.loads((tmp_path / "result.jsonl").read_text().splitlines()[-1])
    for tag in metric_tags(last):
        assert tag.encode() in data, tag
