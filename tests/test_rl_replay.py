"""Replay buffers: capacity in env steps, FIFO, PER sampling, IS weights, beta, stale updates."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

from plangraph.algorithms.a2c import A2CConfig
from plangraph.algorithms.dqn import DQNConfig
from plangraph.ops.resources import ReplayBufferParams
from plangraph.rl.replay_buffer import PrioritizedReplayBuffer, ReplayBuffer, make_replay_buffer
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.sum_tree import MinTree, SumTree


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small MLPs gain nothing from intra-op threads; on 2 shared cores they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _rows(start: int, n: int) -> SampleBatch:
    """Rows tagged by ``actions`` = a global row number; uint8 image observations."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return SampleBatch(
        {
            "obs": np.repeat(ids.astype(np.uint8)[:, None, None], 4, axis=1).repeat(4, axis=2),
            "actions": ids,
            "rewards": ids.astype(np.float32),
        }
    )


def _fill(buf: ReplayBuffer, sizes: list[int]) -> None:
    start = 0
    for n in sizes:
        buf.add(_rows(start, n))
        start += n


def test_capacity_in_env_steps_with_mixed_batch_sizes_and_fifo() -> None:
    buf = ReplayBuffer(10, seed=0)
    _fill(buf, [3, 4])
    assert len(buf) == 7
    buf.add(_rows(7, 5))  # 12 rows added: the oldest two (0, 1) are evicted
    assert len(buf) == 10 and buf.num_added == 12
    seen = set(buf.sample(2000)["actions"].tolist())
    assert seen == set(range(2, 12))
    buf.add(_rows(12, 1))
    assert set(buf.sample(2000)["actions"].tolist()) == set(range(3, 13))
    buf.add(_rows(100, 25))  # larger than capacity: keeps its last 10 rows
    assert len(buf) == 10 and buf.num_added == 38
    assert set(buf.sample(2000)["actions"].tolist()) == set(range(115, 125))


def test_uniform_sampling_dtypes_and_indexes() -> None:
    buf = ReplayBuffer(8, seed=1)
    _fill(buf, [5])
    s = buf.sample(50_000)
    assert s["obs"].dtype == np.uint8 and s["obs"].shape == (50_000, 4, 4)
    np.testing.assert_array_equal(s["obs"][:, 0, 0], s["actions"].astype(np.uint8))
    np.testing.assert_array_equal(s["batch_indexes"], s["actions"])  # insertion ids
    freq = np.bincount(s["actions"], minlength=5) / 50_000
    np.testing.assert_allclose(freq, 0.2, atol=0.01)
    assert "weights" not in s


def test_errors_are_clear() -> None:
    buf = ReplayBuffer(4)
    with pytest.raises(ValueError, match="empty replay buffer"):
        buf.sample(1)
    buf.add(_rows(0, 2))
    with pytest.raises(ValueError, match="columns"):
        buf.add(SampleBatch({"obs": np.zeros((1, 4, 4), np.uint8)}))
    bad = _rows(0, 1)
    bad["obs"] = bad["obs"].astype(np.float32)
    with pytest.raises(ValueError, match="uint8"):
        buf.add(bad)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0)


def _per(capacity: int = 16, **kw: float) -> PrioritizedReplayBuffer:
    args = {"alpha": 1.0, "beta": 0.5, "beta_final": 0.5, "eps": 1e-9, "seed": 0}
    args.update(kw)
    return PrioritizedReplayBuffer(capacity, **args)  # type: ignore[arg-type]


def test_per_new_items_get_current_max_priority_and_are_sampled() -> None:
    buf = _per()
    ids = buf.add(_rows(0, 4))
    assert buf.probabilities().tolist() == [0.25] * 4  # initial max priority 1.0
    assert buf.update_priorities(ids, np.array([1.0, -2.0, 3.0, 4.0])) == 4  # |td|
    buf.add(_rows(4, 1))  # newest row gets the max priority so far, 4
    expected = np.array([1, 2, 3, 4, 4]) / 14
    np.testing.assert_allclose(buf.probabilities(), expected, rtol=1e-6)
    s = buf.sample(200_000)
    freq = np.bincount(s["actions"], minlength=5) / 200_000
    np.testing.assert_allclose(freq, expected, atol=0.005)
    assert freq[4] > 0.25  # the newest item is sampled at the max rate


def test_per_alpha_shapes_the_distribution() -> None:
    buf = _per(alpha=0.5)
    ids = buf.add(_rows(0, 3))
    buf.update_priorities(ids, np.array([1.0, 4.0, 16.0]))
    np.testing.assert_allclose(buf.probabilities(), np.array([1, 2, 4]) / 7, rtol=1e-6)


def test_per_one_item_buffer() -> None:
    buf = _per(capacity=1)
    buf.add(_rows(0, 3))  # capacity 1: only the last row survives
    s = buf.sample(100)
    assert set(s["actions"].tolist()) == {2}
    np.testing.assert_array_equal(s["weights"], np.ones(100, np.float32))
    buf.update_priorities(s["batch_indexes"][:1], np.array([5.0]))
    assert set(buf.sample(10)["actions"].tolist()) == {2}


def test_per_importance_weights_normalised_by_max_weight() -> None:
    buf = _per(beta=0.5, beta_final=0.5)
    ids = buf.add(_rows(0, 4))
    buf.update_priorities(ids, np.array([1.0, 2.0, 4.0, 8.0]))
    s = buf.sample(1000)
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta = (p_i / p_min)^-0.5
    expected = np.array([1.0, 2**-0.5, 0.5, 8**-0.5], np.float32)
    np.testing.assert_allclose(s["weights"], expected[s["actions"]], rtol=1e-6)
    assert s["weights"].dtype == np.float32 and s["weights"].max() <= 1.0


def test_per_beta_anneals_over_sampled_steps() -> None:
    buf = _per(beta=0.4, beta_final=1.0, beta_annealing_steps=100)
    ids = buf.add(_rows(0, 2))
    buf.update_priorities(ids, np.array([1.0, 4.0]))
    assert buf.beta == pytest.approx(0.4)
    first = buf.sample(50)  # uses beta = 0.4, then 50 rows have been sampled
    np.testing.assert_allclose(first["weights"][first["actions"] == 1], 4**-0.4, rtol=1e-6)
    assert buf.beta == pytest.approx(0.7)
    second = buf.sample(50)
    np.testing.assert_allclose(second["weights"][second["actions"] == 1], 4**-0.7, rtol=1e-6)
    buf.sample(500)
    assert buf.beta == pytest.approx(1.0)  # held at beta_final


def test_per_stale_priority_updates_are_ignored() -> None:
    buf = _per(capacity=4)
    buf.add(_rows(0, 4))
    sampled = np.array([0, 1, 2, 3])  # insertion ids of rows 0..3
    buf.add(_rows(4, 2))  # rows 4, 5 overwrite the slots of rows 0, 1
    applied = buf.update_priorities(sampled, np.array([100.0, 100.0, 3.0, 1.0]))
    assert applied == 2
    # slots hold rows [4, 5, 2, 3]; 4 and 5 keep the max priority at their insertion (1.0)
    np.testing.assert_allclose(buf.probabilities(), np.array([1, 1, 3, 1]) / 6, rtol=1e-6)
    assert buf.max_priority == pytest.approx(3.0)
    # an id from the future / never stored is ignored too
    assert buf.update_priorities(np.array([9]), np.array([1.0])) == 0
    with pytest.raises(ValueError, match="entries"):
        buf.update_priorities(np.array([4, 5]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite"):
        buf.update_priorities(np.array([4]), np.array([np.nan]))


@pytest.mark.parametrize("prioritized", [False, True])
def test_state_round_trip_continues_identically(prioritized: bool) -> None:
    params = ReplayBufferParams(capacity=7, prioritized=prioritized, beta_annealing_steps=50)
    buf = make_replay_buffer(params, seed=3)
    assert isinstance(buf, PrioritizedReplayBuffer) == prioritized
    _fill(buf, [3, 6])
    s = buf.sample(5)
    buf.update_priorities(s["batch_indexes"], np.arange(5, dtype=np.float64))
    state = buf.get_state()
    twin = make_replay_buffer(params, seed=99)
    twin.set_state(state)
    a, b = buf.sample(20), twin.sample(20)
    for key in a.keys():
        np.testing.assert_array_equal(a[key], b[key])
    assert len(twin) == len(buf) == 7


def test_sum_tree_prefix_search_matches_cumsum() -> None:
    rng = np.random.default_rng(0)
    for capacity in (1, 5, 8, 13):
        tree, mins = SumTree(capacity), MinTree(capacity)
        values = rng.random(capacity) + 0.01
        tree.set(np.arange(capacity), values)
        mins.set(np.arange(capacity), values)
        assert tree.total == pytest.approx(values.sum())
        assert mins.min == pytest.approx(values.min())
        masses = rng.random(1000) * values.sum()
        expected = np.searchsorted(np.cumsum(values), masses, side="right")
        np.testing.assert_array_equal(tree.find_prefix_sum(masses), expected)
        tree.set(np.array([0, 0]), np.array([5.0, 2.0]))  # last write wins
        assert tree[0] == 2.0 and tree.total == pytest.approx(values[1:].sum() + 2.0)


def test_dqn_replay_loop_updates_priorities_from_td_error() -> None:
    worker = RolloutWorker("CartPole-v1", 2, 16, DQNConfig(hiddens=(16,)), seed=0)
    buf = _per(capacity=100, alpha=0.6)
    buf.add(worker.sample())
    batch = buf.sample(32)
    stats = worker.policy.train(batch)
    assert stats["td_error"].shape == (32,) and stats["num_env_steps_trained"] == 32
    assert buf.update_priorities(batch["batch_indexes"], stats["td_error"]) == 32
    assert buf.max_priority >= float(np.abs(stats["td_error"]).max())


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_large_buffer_reserves_memory_only_as_it_fills(prioritized: bool) -> None:
    """Capacity 4M env steps: creating the buffer and adding 100 rows allocates kilobytes,
    not the ~100 MB of full storage, ids and PER trees; storage doubles as data arrives."""
    import tracemalloc  # numpy reports its array allocations to tracemalloc

    capacity = 1 << 22
    tracemalloc.start()
    try:
        buf = make_replay_buffer(ReplayBufferParams(capacity=capacity, prioritized=prioritized))
        buf.add(_rows(0, 100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 1024**2
    small = buf.nbytes
    _fill(buf, [3000])
    assert small < buf.nbytes < small * 8  # 1024 -> 4096 rows, not 4M
    assert len(buf) == 3100


@pytest.mark.parametrize("prioritized", [False, True])
def test_growing_storage_keeps_fifo_sampling_priorities_and_state(prioritized: bool) -> None:
    """Capacity 2500 > the initial 1024 rows: the buffer grows twice, then wraps; FIFO
    contents, PER probabilities and a state round trip behave as with full storage."""
    params = ReplayBufferParams(capacity=2500, prioritized=prioritized)
    buf = make_replay_buffer(params, seed=1)
    start = 0
    for n in (700, 700, 700, 700, 700):
        buf.add(_rows(start, n))
        start += n
        window = set(range(max(0, start - 2500), start))
        assert len(buf) == len(window)
        assert set(buf.sample(30_000)["actions"].tolist()) == window
    if prioritized:
        assert isinstance(buf, PrioritizedReplayBuffer)
        s = buf.sample(64)
        td = np.arange(1.0, 65.0)
        assert buf.update_priorities(s["batch_indexes"], td) == 64
        probs = buf.probabilities()
        assert probs.shape == (2500,) and probs.sum() == pytest.approx(1.0)
    twin = make_replay_buffer(params, seed=7)
    twin.set_state(buf.get_state())
    a, b = buf.sample(50), twin.sample(50)
    for key in a.keys():
        np.testing.assert_array_equal(a[key], b[key])
    assert buf.update_priorities(np.array([-1, 10**9]), np.array([1.0, 1.0])) == 0


@pytest.mark.parametrize(
    "config",
    [DQNConfig(hiddens=(8,)), DQNConfig(hiddens=(8,), n_step=3), A2CConfig(hiddens=(8,))],
    ids=["dqn", "dqn-n3", "a2c"],
)
def test_row_layout_and_memory_estimate_match_a_real_buffer(config: object) -> None:
    from plangraph.rl.replay_buffer import replay_nbytes
    from plangraph.rl.rollout_worker import sample_row_layout

    worker = RolloutWorker("CartPole-v1", 2, 16, config, seed=0)
    batch = worker.sample()
    layout = sample_row_layout(worker.observation_space, worker.action_space, config)
    assert layout == {k: (v.shape[1:], v.dtype) for k, v in batch.items()}
    for prioritized in (False, True):
        buf = make_replay_buffer(ReplayBufferParams(capacity=96, prioritized=prioritized))
        for _ in range(3):
            buf.add(batch)  # 96 rows: full
        assert buf.nbytes == replay_nbytes(96, layout, prioritized)
