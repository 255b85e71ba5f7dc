"""Offline data: the recorded schema round-trips, bad datasets are refused before launch
(or at the first read) with a located message, shuffling and sharding read every row once
per epoch, and a plan records (WriteExperiences) and trains from a dataset (BC) with
greedy evaluation online. Real Parquet files in tmp_path, real Ray, real envs and torch."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import plangraph
from plangraph.errors import BuildError, DatasetError
from plangraph.rl import SampleBatch
from plangraph.rl.multi_agent_batch import MultiAgentBatch
from plangraph.rl.offline import (
    ExperienceWriter,
    OfflineDataset,
    action_bounds,
    check_layout,
    discounted_returns,
    inspect_dataset,
    read_metadata,
    record_columns,
    table_columns,
)

ROOT = Path(__file__).resolve().parent.parent
CARTPOLE = gym.make("CartPole-v1")
PENDULUM = gym.make("Pendulum-v1")


def _batch(rows: int, start: int = 0, *, box: bool = False, seed: int = 0) -> SampleBatch:
    """``rows`` CartPole-shaped (or Pendulum-shaped, ``box``) rows; row ``i`` has ``t =
    start + i`` (a unique row id) in episode ``(start + i) // 10``."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + rows, dtype=np.int64)
    actions = rng.normal(size=(rows, 1)).astype(np.float32) if box else (ids % 2).astype(np.int64)
    return SampleBatch(
        {
            "obs": rng.normal(size=(rows, 3 if box else 4)).astype(np.float32),
            "actions": actions,
            "rewards": rng.normal(size=rows).astype(np.float32),
            "terminateds": ids % 10 == 9,
            "truncateds": np.zeros(rows, dtype=bool),
            "eps_id": ids // 10,
            "t": ids,
            "action_logp": rng.normal(size=rows).astype(np.float32),
            "vf_preds": np.zeros(rows, dtype=np.float32),  # not recorded
        }
    )


def _record(path: Path, batches: list[Any], max_file_bytes: int = 4096) -> ExperienceWriter:
    writer = ExperienceWriter(
        str(path), metadata={"env": "CartPole-v1"}, max_file_bytes=max_file_bytes, prefix="t"
    )
    for b in batches:
        for columns in record_columns(b):
            writer.write(columns)
    writer.close()
    return writer


def _read_all(path: Path) -> dict[str, np.ndarray]:
    info = inspect_dataset(str(path))
    tables = [pq.read_table(f) for f in info.files]
    return table_columns(pa.concat_tables(tables), info.shapes)


# -- schema ---------------------------------------------------------------------------------


def test_recorded_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    batches = [_batch(64, 64 * k) for k in range(6)]
    writer = _record(tmp_path / "ds", batches)
    info = inspect_dataset(str(tmp_path / "ds"))
    assert len(info.files) > 1  # bounded files: 4 KiB of rows each
    assert info.num_rows == 6 * 64 == writer.rows_written
    assert info.columns == {
        "obs": ((4,), "float32"),
        "actions": ((), "int64"),
        "rewards": ((), "float32"),
        "terminateds": ((), "bool"),
        "truncateds": ((), "bool"),
        "eps_id": ((), "int64"),
        "t": ((), "int64"),
        "action_logp": ((), "float32"),
    }
    got = _read_all(tmp_path / "ds")
    want = SampleBatch.concat_samples(batches)
    order = np.argsort(got["t"])
    for name in info.columns:
        expected = want[name] + (writer.eps_id_offset if name == "eps_id" else 0)
        np.testing.assert_array_equal(got[name][order], expected, err_msg=name)
        assert got[name].dtype == want[name].dtype
    meta = read_metadata(str(tmp_path / "ds"))
    assert meta is not None and meta["schema_version"] == 1 and meta["env"] == "CartPole-v1"
    assert meta["columns"]["obs"] == {"shape": [4], "dtype": "float32"}
    assert not [p for p in (tmp_path / "ds").iterdir() if p.name.startswith(".")]


def test_images_box_actions_and_multi_agent_rows_round_trip(tmp_path: Path) -> None:
    rows = 8
    image = SampleBatch(
        {
            **{k: v for k, v in _batch(rows, box=True).items() if k != "obs"},
            "obs": np.arange(rows * 3 * 2 * 2, dtype=np.uint8).reshape(rows, 3, 2, 2),
            "next_obs": np.ones((rows, 3, 2, 2), dtype=np.uint8),
        }
    )
    _record(tmp_path / "img", [image])
    got = _read_all(tmp_path / "img")
    np.testing.assert_array_equal(got["obs"], image["obs"])
    np.testing.assert_array_equal(got["next_obs"], image["next_obs"])
    assert got["actions"].shape == (rows, 1) and got["actions"].dtype == np.float32

    ma = MultiAgentBatch(
        {
            "a": SampleBatch({**_batch(4), "agent_index": np.zeros(4, dtype=np.int64)}),
            "b": SampleBatch({**_batch(6, 100), "agent_index": np.ones(6, dtype=np.int64)}),
        },
        env_steps=6,
    )
    _record(tmp_path / "ma", [ma], max_file_bytes=1 << 20)
    got = _read_all(tmp_path / "ma")
    assert sorted(got["policy_id"].tolist()) == ["a"] * 4 + ["b"] * 6
    assert sorted(got["agent_index"].tolist()) == [0] * 4 + [1] * 6


def test_returns_to_go_stop_at_episode_ends_in_any_row_order() -> None:
    cols = {
        "eps_id": np.array([7, 3, 7, 3, 7]),
        "t": np.array([2, 1, 0, 0, 1]),
        "rewards": np.array([1.0, 2.0, 1.0, 4.0, 1.0], dtype=np.float32),
    }
    np.testing.assert_allclose(discounted_returns(cols, 0.5), [1.0, 2.0, 1.75, 5.0, 1.5], rtol=1e-6)


# -- bad data -------------------------------------------------------------------------------


def test_missing_empty_and_corrupt_datasets_name_the_path_or_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        inspect_dataset(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"holds no \.parquet file"):
        inspect_dataset(str(tmp_path / "empty"))
    (tmp_path / "norows").mkdir()
    empty = pa.table({"obs": pa.array([], pa.float32())})
    pq.write_table(empty, tmp_path / "norows" / "a.parquet")
    with pytest.raises(DatasetError, match="holds no rows"):
        inspect_dataset(str(tmp_path / "norows"))
    _record(tmp_path / "bad", [_batch(64)])
    (tmp_path / "bad" / "zz-corrupt.parquet").write_bytes(b"PAR1 not really parquet")
    with pytest.raises(DatasetError, match=r"zz-corrupt\.parquet.* is not a readable Parquet"):
        inspect_dataset(str(tmp_path / "bad"))


def test_mixed_schemas_missing_columns_and_wrong_dtypes_name_the_column(tmp_path: Path) -> None:
    _record(tmp_path / "mixed", [_batch(64)])
    pq.write_table(
        pa.table({"obs": pa.array([1.0], pa.float64())}), tmp_path / "mixed" / "zz.parquet"
    )
    with pytest.raises(DatasetError, match=r"zz\.parquet.* has other columns"):
        inspect_dataset(str(tmp_path / "mixed"))

    (tmp_path / "partial").mkdir()
    pq.write_table(
        pa.table(
            {
                "obs": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(8)), 4),  # float64
                "actions": pa.array([0.5, 1.5], pa.float32()),  # float actions
                "rewards": pa.array([1.0, 1.0], pa.float32()),
            }
        ),
        tmp_path / "partial" / "a.parquet",
    )
    info = inspect_dataset(str(tmp_path / "partial"))
    problems = dict(check_layout(info, CARTPOLE.observation_space, CARTPOLE.action_space))
    assert set(problems) == {"obs", "actions", "terminateds", "truncateds", "eps_id", "t"}
    assert "float64 rows of shape [4]" in problems["obs"] and "float32" in problems["obs"]
    assert "continuous (float) actions" in problems["actions"]
    assert "column 't' is missing" in problems["t"]

    _record(tmp_path / "cartpole", [_batch(16)])
    info = inspect_dataset(str(tmp_path / "cartpole"))
    problems = dict(check_layout(info, PENDULUM.observation_space, PENDULUM.action_space))
    assert "discrete (integer) actions" in problems["actions"]
    assert "shape [3]" in problems["obs"]
    assert not check_layout(info, CARTPOLE.observation_space, CARTPOLE.action_space)


def _bc_plan(dataset: Path, **config: Any) -> Any:
    return plangraph.compile(
        ROOT / "plans" / "bc.json",
        config={"dataset": str(dataset), "train_batch_size": 32, **config},
    )


def _offline_plan(dataset: Path, algo: str) -> Any:
    from plangraph.ops import (
        ReadExperiences,
        StandardMetricsReporting,
        TrainOneStep,
        offline_data,
        worker_set,
    )

    read = ReadExperiences(batch_size=32, id="read")
    plan = plangraph.Plan.from_builder(
        StandardMetricsReporting(read.for_each(TrainOneStep(id="train")), id="metrics"),
        name=f"{algo}_offline",
        resources={
            "workers": worker_set(env="CartPole-v1", num_workers=0, policy={"algo": algo}),
            "offline": offline_data(path=str(dataset)),
        },
    )
    return plangraph.compile(plan)


def test_a_dataset_that_does_not_fit_the_env_stops_the_build_before_launch(
    tmp_path: Path,
) -> None:
    import ray

    was_up = ray.is_initialized()
    with pytest.raises(BuildError, match=r"/resources/offline/params/path.*does not exist"):
        plangraph.build(_bc_plan(tmp_path / "missing"))
    _record(tmp_path / "pendulum", [_batch(16, box=True)])
    with pytest.raises(BuildError) as err:
        plangraph.build(_bc_plan(tmp_path / "pendulum"))
    text = str(err.value)
    assert "node 'read'" in text and "/resources/offline/params/path" in text
    assert "column 'obs'" in text and "column 'actions'" in text and "CartPole-v1" in text
    _record(tmp_path / "cartpole", [_batch(16)])
    with pytest.raises(BuildError, match=r"algo 'ppo'.*column 'advantages' is missing"):
        plangraph.build(_offline_plan(tmp_path / "cartpole", "ppo"))
    assert ray.is_initialized() == was_up  # refused before Ray started


@pytest.mark.usefixtures("ray_session")
def test_nan_rewards_stop_the_first_read_naming_the_column(tmp_path: Path) -> None:
    batch = _batch(32)
    batch["rewards"][5] = np.nan
    _record(tmp_path / "nan", [batch])
    dataset = OfflineDataset(inspect_dataset(str(tmp_path / "nan")), shuffle_buffer_size=0)
    with pytest.raises(
        DatasetError, match=r"t-.*-000000\.parquet', row group 0: column 'rewards' holds NaN"
    ):
        next(dataset.batches(16))


@pytest.mark.usefixtures("ray_session")
def test_actions_outside_the_env_action_space_are_refused_naming_the_column(
    tmp_path: Path,
) -> None:
    """The learners do not validate actions (``ActorCriticPolicy.dist``): a dataset row
    with an action the env's ``Discrete(2)`` cannot take is refused where it is read, like
    a NaN, naming the file, the row group, the column, the range and the rows."""
    batch = _batch(32)
    batch["actions"][[3, 9]] = [2, -1]
    _record(tmp_path / "bad", [batch])
    info = inspect_dataset(str(tmp_path / "bad"))
    bounds = action_bounds(CARTPOLE.action_space)
    dataset = OfflineDataset(info, shuffle_buffer_size=0, action_bounds=bounds)
    with pytest.raises(
        DatasetError,
        match=r"row group 0: column 'actions' holds actions outside the env's action space "
        r"\(0 <= a < 2\) in 2 of the 32 rows of it read into this batch \(the first at "
        r"eps_id \d+, t \d+: 2\)",
    ):
        next(dataset.batches(32))
    # Without the env's range (a Box env's dataset) the same rows pass: nothing to check.
    assert len(next(OfflineDataset(info, shuffle_buffer_size=0).batches(32))["actions"]) == 32


def test_action_bounds_follow_the_space() -> None:
    discrete = action_bounds(gym.spaces.Discrete(3, start=1))
    assert discrete is not None and [int(x) for x in discrete] == [1, 4]
    multi = action_bounds(gym.spaces.MultiDiscrete([2, 5]))
    assert multi is not None and [x.tolist() for x in multi] == [[0, 0], [2, 5]]
    assert action_bounds(PENDULUM.action_space) is None


def test_nan_rewards_in_a_later_file_stop_the_run_and_keep_its_checkpoints(
    tmp_path: Path,
) -> None:
    """A run reads good files for some iterations, then a file whose rewards hold NaN: it
    stops with a non-zero status naming that file, its row group and the column, and the
    checkpoints of the iterations before stay complete and loadable."""
    import subprocess
    import sys

    from plangraph.runtime.algorithm import Checkpoint
    from plangraph.runtime.run_loop import latest_checkpoint

    data = tmp_path / "data"
    _record(data, [_batch(64, 64 * k) for k in range(3)])  # t-*.parquet, read first
    bad = _batch(32, 1000)
    bad["rewards"][7] = np.nan
    writer = ExperienceWriter(str(data), metadata={"env": "CartPole-v1"}, prefix="zz")
    for columns in record_columns(bad):
        writer.write(columns)
    writer.close()
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "plangraph", "run", str(ROOT / "plans" / "bc.json"),
            f"--set=dataset={data}", "--set=shuffle_buffer_size=0", "--set=train_batch_size=32",
            "--max-iterations=50", "--checkpoint-every=1", f"--out={run_dir}", "--no-progress",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    err = proc.stderr
    assert proc.returncode != 0, err[-3000:]
    assert re.search(r"zz-.*\.parquet', row group 0: column 'rewards' holds NaN", err), err[-3000:]
    kept = latest_checkpoint(run_dir)
    assert kept is not None, err[-3000:]
    # plangraph's own refusal: one line of error, then what was kept, no stack to dig in
    assert "Traceback" not in err and "plangraph run: error: plan node 'read'" in err, err
    assert f"checkpoint kept: {kept}" in err
    assert f"continue, once fixed, with: plangraph run --resume {run_dir}" in err
    # Without shuffling the 192 good rows are read first (the NaN file sorts last).
    assert Checkpoint.load(kept).meta.iteration >= 1
    assert not list((run_dir / "checkpoints").glob("*.tmp"))


# -- shuffling and sharding -----------------------------------------------------------------


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("num_readers", [1, 2])
def test_every_row_is_read_once_per_epoch_shuffled_and_split(
    tmp_path: Path, num_readers: int
) -> None:
    rows = 600
    _record(tmp_path / "ds", [_batch(100, 100 * k) for k in range(rows // 100)])
    info = inspect_dataset(str(tmp_path / "ds"))
    assert len(info.files) >= 2
    dataset = OfflineDataset(
        info, shuffle_buffer_size=128, num_readers=num_readers, seed=3, read_concurrency=1
    )
    stream = dataset.batches(50)
    try:
        epochs: list[list[int]] = [[], []]
        for epoch in epochs:
            for columns in stream:
                if columns is None:  # the end of the epoch
                    break
                assert len(columns["t"]) <= 50
                epoch.extend(columns["t"].tolist())
    finally:
        dataset.stop()
    for ids in epochs:
        assert sorted(ids) == list(range(rows))  # every row once
        assert ids != sorted(ids)  # shuffled
    assert epochs[0] != epochs[1]  # a new order each epoch


# -- plans ----------------------------------------------------------------------------------


def test_write_experiences_records_then_bc_trains_and_evaluates_online(tmp_path: Path) -> None:
    from plangraph.ops import (
        ConcatBatches,
        ParallelRollouts,
        StandardMetricsReporting,
        TrainOneStep,
        WriteExperiences,
        worker_set,
    )

    data = tmp_path / "data"
    rollouts = ParallelRollouts(id="rollouts")
    recorded = rollouts.for_each(WriteExperiences(path=str(data), max_file_mb=0.002, id="record"))
    train = recorded.combine(ConcatBatches(min_batch_size=64, id="concat")).for_each(
        TrainOneStep(id="train")
    )
    plan = plangraph.Plan.from_builder(
        StandardMetricsReporting(train, id="metrics"),
        name="ppo_recorded",
        resources={
            "workers": worker_set(
                env="CartPole-v1",
                num_workers=1,
                num_envs_per_worker=2,
                rollout_fragment_length=32,
                policy={"algo": "ppo"},
            )
        },
    )
    with plangraph.build(plangraph.compile(plan), seed=1) as algo:
        results = [algo.train() for _ in range(3)]
    assert results[-1]["counters"]["num_env_steps_recorded"] == 3 * 64
    info = inspect_dataset(str(data))
    assert info.num_rows == 3 * 64 and len(info.files) >= 2
    meta = json.loads((data / "metadata.json").read_text())
    assert meta["env"] == "CartPole-v1" and meta["seed"] == 1 and meta["algo"] == "ppo"
    assert meta["observation_space"]["shape"] == [4] and meta["action_space"]["n"] == 2
    assert meta["plan"]["name"] == "ppo_recorded" and meta["plangraph_version"]

    compiled = _bc_plan(data)
    with plangraph.build(compiled, seed=0, evaluation_interval=4, evaluation_episodes=2) as algo:
        results = [algo.train() for _ in range(8)]
    last = results[-1]
    counters = last["counters"]
    assert counters["num_env_steps_read"] == counters["num_env_steps_trained"] > 0
    assert counters["num_dataset_epochs"] >= 1  # 192 rows: an epoch every 6 batches of 32
    assert last["num_env_steps_sampled"] == 0
    assert "evaluation" in results[3] and "evaluation" in last
    assert last["learner"]["policy_loss"] > 0


def test_an_offline_run_reports_rows_read_and_plangraph_eval_plays_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    _record(tmp_path / "data", [_batch(64, 64 * k) for k in range(2)])

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "plangraph", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    run = cli(
        "run", str(ROOT / "plans" / "bc.json"), f"--set=dataset={tmp_path / 'data'}",
        "--set=train_batch_size=32", "--max-iterations=5", "--out=run", "--no-progress",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = run.stdout + run.stderr
    assert "iter 5: rows read 160 (epoch 2), return -" in out
    assert "rows read (offline)" in out and "dataset epochs completed (offline)" in out
    assert "env steps recorded" not in out
    assert "env steps sampled" not in out
    played = cli("eval", "run", "--episodes", "2")
    assert played.returncode == 0, played.stderr
    assert "2 greedy episodes" in played.stdout + played.stderr


def test_marwil_weights_the_log_likelihood_by_exponentiated_advantages() -> None:
    import torch

    from plangraph.rl.policies import make_policy

    space = (CARTPOLE.observation_space, CARTPOLE.action_space)
    rng = np.random.default_rng(0)
    t = {
        "obs": torch.tensor(rng.normal(size=(16, 4)), dtype=torch.float32),
        "actions": torch.tensor(rng.integers(0, 2, size=16)),
        "returns": torch.tensor(rng.uniform(0, 50, size=16), dtype=torch.float32),
    }
    rate = 0.5
    marwil = make_policy(
        *space,
        {"algo": "marwil", "beta": 2.0, "moving_average_sqd_adv_norm_update_rate": rate},
        0,
    )
    inputs, values = marwil.model.pi_vf(t["obs"])
    logp = marwil.dist(inputs).log_prob(t["actions"])
    adv = (t["returns"] - values).detach()
    c2 = 100.0 + rate * (float((adv**2).mean()) - 100.0)
    weights = torch.exp(2.0 * adv / (c2**0.5 + 1e-8)).clamp(max=20.0)
    want = -(weights * logp).mean() + 0.5 * ((values - t["returns"]) ** 2).mean()
    loss, stats = marwil.compute_loss(t)
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert stats["ma_adv_norm"] == pytest.approx(c2, rel=1e-5)
    assert "ma_adv_norm" in marwil.get_weights()  # travels with the weights, checkpointed

    bc = make_policy(*space, {"algo": "bc"}, 0)
    assert bc.loss_columns == ("obs", "actions")  # no returns: the reader adds none
    loss, _ = bc.compute_loss(t)
    logp = bc.dist(bc.model.pi(t["obs"])).log_prob(t["actions"])
    assert loss.item() == pytest.approx(-logp.mean().item(), rel=1e-6)


@pytest.mark.usefixtures("ray_session")
def test_the_reader_adds_each_rows_discounted_return_to_go_over_its_whole_episode(
    tmp_path: Path,
) -> None:
    # Episodes of 10 rows, split over files (4 KiB each): the groupby joins them again.
    batches = [_batch(64, 64 * k) for k in range(4)]
    writer = _record(tmp_path / "ds", batches)
    info = inspect_dataset(str(tmp_path / "ds"))
    assert len(info.files) > 1
    dataset = OfflineDataset(info, shuffle_buffer_size=64, seed=1, returns_gamma=0.9)
    got: dict[int, float] = {}
    for columns in dataset.batches(40):
        if columns is None:
            break
        got.update(zip(columns["t"].tolist(), columns["returns"].tolist(), strict=True))
    rows = SampleBatch.concat_samples(batches)
    want = discounted_returns(
        {
            "eps_id": rows["eps_id"] + writer.eps_id_offset,
            "t": rows["t"],
            "rewards": rows["rewards"],
        },
        0.9,
    )
    assert sorted(got) == rows["t"].tolist()
    np.testing.assert_allclose([got[t] for t in rows["t"].tolist()], want, rtol=1e-5)


# -- plangraph validate --datasets ----------------------------------------------------------


def test_validate_datasets_reports_what_run_refuses_at_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same check as ``plangraph run``'s before launch, as PG198 diagnostics: the same
    message and hint, located where the plan gives the dataset's path; off without
    ``--datasets``."""
    from plangraph import cli

    _record(tmp_path / "pendulum", [_batch(16, box=True)])  # no next_obs, Pendulum rows
    cases = [("bc.json", "column 'obs'"), ("cql.json", "'next_obs'")]
    for plan, column in cases:
        sets = [f"--set=dataset={tmp_path / 'pendulum'}", "--set=train_batch_size=32"]
        argv = ["validate", "--format=json", "--datasets", f"plans/{plan}", *sets]
        rc = cli.main(argv)
        data = json.loads(capsys.readouterr().out)
        (d,) = data["plans"][0]["diagnostics"]
        assert rc == 1 and d["code"] == "PG198" and d["node"] == "read"
        assert d["pointer"] == "/resources/offline/params/path" and column in d["message"]
        assert d["file"] == f"plans/{plan}" and d["line"] is not None
        overrides = {"dataset": str(tmp_path / "pendulum"), "train_batch_size": 32}
        with pytest.raises(BuildError) as err:
            plangraph.build(plangraph.compile(ROOT / "plans" / plan, config=overrides))
        # what run prints: the node, then the diagnostic's message and hint
        assert str(err.value) == f"node 'read' {d['message']}; {d['hint']}"
        assert cli.main(argv[:2] + argv[3:]) == 0  # without --datasets: not read
        capsys.readouterr()
    rc = cli.main(["validate", "--datasets", "plans/cql.json", f"--set=dataset={tmp_path}/no"])
    out = capsys.readouterr().out
    assert rc == 1 and "plans/cql.json:39:17: error PG198 [dataset] resource 'offline'" in out
    assert "does not exist" in out and "  at /resources/offline/params/path" in out


def test_validate_datasets_reads_footers_only_without_ray_or_torch(tmp_path: Path) -> None:
    import subprocess
    import sys

    _record(tmp_path / "data", [_batch(64, box=True)])
    code = (
        "import sys\n"
        "from plangraph.cli import main\n"
        f"rc = main(['validate', '--quiet', '--datasets', 'plans/bc.json', "
        f"'--set=dataset={tmp_path / 'data'}'])\n"
        "print(rc, sorted(m for m in ('ray', 'torch') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip().splitlines()[-1] == "1 []", proc.stderr
    assert "PG198" in proc.stdout


def test_each_builtin_algorithm_declares_the_dataset_columns_its_learner_reads() -> None:
    """``dataset_columns`` (torch-free, read by validate) is the learner's ``loss_columns``
    less the optional, derived and always recorded ones (what run checks)."""
    from plangraph.ops.algorithms import algorithms
    from plangraph.rl.offline import DERIVED_COLUMNS, REQUIRED_COLUMNS
    from plangraph.rl.policies import policy_class

    for name, spec in sorted(algorithms().items()):
        learner = policy_class(spec.config())
        skip = (*learner.optional_loss_columns, *DERIVED_COLUMNS, *REQUIRED_COLUMNS)
        expected = tuple(c for c in learner.loss_columns if c not in skip)
        assert spec.config.dataset_columns == expected, name
