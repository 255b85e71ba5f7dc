"""Optional loggers of a run's metrics: MLflow and Weights & Biases (``--logger``).

Each receives, per iteration, the same ``metric_tags`` names as TensorBoard
(``rollout/episode_return_mean``, ``learner/total_loss``, ...) at step
``num_env_steps_sampled`` (env steps), and the run's settings (``run.json``) as params /
config once. Both libraries are optional extras (``pip install 'plangraph[mlflow]'``,
``'plangraph[wandb]'``) and imported only when asked for.

- MLflow: a run in experiment ``experiment`` of the tracking store ``uri`` (default
  ``file:RUN_DIR/mlruns``, a local store that ``mlflow ui --backend-store-uri`` and
  ``MlflowClient`` read). Its run id is kept in ``RUN_DIR/mlflow_run.json`` so that
  ``--resume`` continues the same MLflow run.
- W&B: ``wandb.init`` in ``RUN_DIR/wandb``, offline unless ``WANDB_MODE`` says
  otherwise (``wandb sync RUN_DIR/wandb/offline-run-*`` uploads it later).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LOGGERS", "MlflowLogger", "WandbLogger", "logger_problem", "make_loggers"]

LOGGERS: dict[str, tuple[str, str]] = {
    "mlflow": ("mlflow", "plangraph[mlflow]"),
    "wandb": ("wandb", "plangraph[wandb]"),
}
"""``--logger`` name -> (module it needs, the extra that installs it)."""

MLFLOW_RUN_FILE = "mlflow_run.json"


def logger_problem(names: Sequence[str]) -> str | None:
    """Why a ``--logger`` cannot be used here (unknown, or its library not installed),
    checked before Ray starts; ``None`` when all can."""
    import importlib.util

    for name in names:
        if name not in LOGGERS:
            return f"--logger {name}: unknown; choose from {', '.join(sorted(LOGGERS))}"
        module, extra = LOGGERS[name]
        if importlib.util.find_spec(module) is None:
            return f"--logger {name}: {module} is not installed; pip install '{extra}'"
    return None


def _params(settings: Mapping[str, Any]) -> dict[str, str]:
    """Flat string params (MLflow's limit is 6000 characters per value)."""
    out: dict[str, str] = {}
    for key, value in sorted(settings.items()):
        if isinstance(value, Mapping) and value:
            for k, v in sorted(value.items()):
                out[f"{key}.{k}"] = json.dumps(v)[:6000]
        else:
            out[key] = json.dumps(value)[:6000]
    return out


class MlflowLogger:
    """Metrics to an MLflow run through ``mlflow.tracking.MlflowClient`` (no global
    ``mlflow.start_run`` state, so several runs in one process do not mix)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        uri: str | None = None,
        experiment: str = "plangraph",
        run_name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        run_dir = Path(run_dir)
        self.uri = uri or f"file:{(run_dir / 'mlruns').resolve()}"
        if self.uri.startswith("file:"):
            # MLflow 3 keeps the file store in maintenance mode and refuses it unless told;
            # a local, server-less store is what a laptop run wants.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=self.uri)
        record = run_dir / MLFLOW_RUN_FILE
        saved = _read_json(record)
        if saved.get("uri") == self.uri and isinstance(saved.get("run_id"), str):
            self.run_id: str = saved["run_id"]
            self._client.update_run(self.run_id, status="RUNNING")
            return
        found = self._client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found else self._client.create_experiment(experiment)
        run = self._client.create_run(exp_id, run_name=run_name or run_dir.name)
        self.run_id = run.info.run_id
        if settings:
            from mlflow.entities import Param

            params = [Param(k, v) for k, v in _params(settings).items()]
            self._client.log_batch(self.run_id, params=params)
        run_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run_id": self.run_id, "uri": self.uri}) + "\n")

    def log(self, tags: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(name, value, now, step) for name, value in tags.items()]
        for i in range(0, len(metrics), 1000):  # MLflow's log_batch limit
            self._client.log_batch(self.run_id, metrics=metrics[i : i + 1000])

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


class WandbLogger:
    """Metrics to a Weights & Biases run (offline by default: no network, no account)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        project: str = "plangraph",
        run_name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        import wandb

        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        self._run = wandb.init(
            project=project,
            name=run_name or run_dir.name,
            dir=str(run_dir),
            mode=os.environ.get("WANDB_MODE", "offline"),
            config=dict(settings or {}),
            reinit="create_new",
        )

    def log(self, tags: Mapping[str, float], step: int) -> None:
        self._run.log(dict(tags), step=step)

    def close(self) -> None:
        self._run.finish()


def make_loggers(
    names: Sequence[str],
    run_dir: Path,
    *,
    experiment: str,
    settings: Mapping[str, Any] | None = None,
    mlflow_uri: str | None = None,
) -> list[Any]:
    """The loggers named by ``--logger`` for ``run_dir`` (``experiment`` names the MLflow
    experiment and the W&B project)."""
    loggers: list[Any] = []
    for name in dict.fromkeys(names):  # each once, in the order given
        if name == "mlflow":
            loggers.append(
                MlflowLogger(run_dir, uri=mlflow_uri, experiment=experiment, settings=settings)
            )
        elif name == "wandb":
            loggers.append(WandbLogger(run_dir, project=experiment, settings=settings))
        else:
            raise ValueError(f"unknown logger {name!r}; see LOGGERS")
    return loggers


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
