"""SampleBatch: columns, dtypes, concat, slicing, shuffling, minibatches, episode stats."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
import typing

import numpy as np
import pytest

from plangraph.rl.sample_batch import SampleBatch


def _batch(n: int, start: int = 0) -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(start, start + n, dtype=np.uint8).reshape(n, 1).repeat(3, axis=1),
            "actions": np.arange(start, start + n, dtype=np.int64),
            "rewards": np.ones(n, dtype=np.float32),
        },
        episode_returns=[float(start)],
        episode_lengths=[start + 1],
    )


def test_count_env_steps_and_dtypes_preserved() -> None:
    b = _batch(5)
    assert b.count == len(b) == b.env_steps() == 5
    assert b["obs"].dtype == np.uint8 and b["obs"].shape == (5, 3)
    assert b["actions"].dtype == np.int64


def test_concat_keeps_rows_dtypes_and_episode_stats() -> None:
    a, b = _batch(3, 0), _batch(4, 10)
    c = SampleBatch.concat_samples([a, b])
    assert c.count == 7
    assert c["obs"].dtype == np.uint8
    np.testing.assert_array_equal(c["actions"], [0, 1, 2, 10, 11, 12, 13])
    np.testing.assert_array_equal(c.episode_returns, [0.0, 10.0])
    np.testing.assert_array_equal(c.episode_lengths, [1, 11])
    d = a.concat(b).concat(_batch(1, 20))
    assert d.count == 8 and d.episode_lengths.tolist() == [1, 11, 21]


def test_concat_rejects_mismatched_columns() -> None:
    a = _batch(2)
    b = SampleBatch({"obs": np.zeros((2, 3), np.uint8)})
    with pytest.raises(ValueError, match="different columns"):
        SampleBatch.concat_samples([a, b])


def test_mismatched_rows_rejected() -> None:
    with pytest.raises(ValueError, match="has 3 rows but the batch has 2"):
        SampleBatch({"a": np.zeros(2), "b": np.zeros(3)})


def test_missing_column_error_lists_columns() -> None:
    with pytest.raises(KeyError, match="columns"):
        _ = _batch(2)["advantages"]


def test_slice_select_and_shuffle() -> None:
    b = _batch(10)
    s = b[2:5]
    np.testing.assert_array_equal(s["actions"], [2, 3, 4])
    assert s.episode_returns.size == 0  # rows, not episodes
    assert np.shares_memory(s["actions"], b["actions"])  # slices are views
    sh = b.shuffle(np.random.default_rng(0))
    assert sorted(sh["actions"].tolist()) == list(range(10))
    assert sh["actions"].tolist() != list(range(10))
    # rows stay aligned across columns
    np.testing.assert_array_equal(sh["obs"][:, 0], sh["actions"].astype(np.uint8))


def test_minibatches_cover_every_row_once() -> None:
    b = _batch(10)
    sizes, seen = [], []
    for mb in b.minibatches(4, rng=0):
        sizes.append(mb.count)
        seen += mb["actions"].tolist()
    assert sizes == [4, 4, 2]
    assert sorted(seen) == list(range(10))
    assert [mb.count for mb in b.minibatches(0)] == [10]
    unshuffled = [mb["actions"].tolist() for mb in b.minibatches(5, shuffle=False)]
    assert unshuffled == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_pickle_round_trip_keeps_stats() -> None:
    b = _batch(3, 7)
    c = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(c["obs"], b["obs"])
    assert c.episode_lengths.tolist() == [8]


def test_rl_package_import_is_light() -> None:
    code = (
        "import sys, plangraph.rl as rl; from plangraph.rl import SampleBatch; "
        "bad = [m for m in ('torch', 'ray', 'gymnasium') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_rl_package_lazy_exports_resolve() -> None:
    import plangraph.rl as rl

    assert sorted(rl.__all__) == sorted(rl._EXPORTS)
    for name in rl.__all__:
        if name == "Stats":  # a type alias: dict[str, Any]
            assert rl.Stats == dict[str, typing.Any]
            continue
        value = getattr(rl, name)
        assert value is getattr(importlib.import_module(rl._EXPORTS[name]), name)
        if not name.isupper():  # constants (TRANSITION_LOSS_COLUMNS) have no __name__
            assert value.__name__ == name


def test_concat_of_row_less_batches_keeps_episode_stats() -> None:
    stats_only = SampleBatch(episode_returns=[1.5], episode_lengths=[3])
    c = SampleBatch.concat_samples([stats_only, _batch(2)])
    assert c.count == 2 and c.episode_lengths.tolist() == [3, 1]
    only = SampleBatch.concat_samples([stats_only])
    assert only.count == 0 and only.episode_returns.tolist() == [1.5]
