"""CQL (Kumar et al. 2020, CQL(H) on SAC): the conservative term as the paper states it, on
numbers checked by hand and against an independent computation from the policy's own
networks; the critics' loss is SAC's plus the weighted gaps; the term lowers Q off the
data; the behaviour-cloning warm-start and the Lagrangian; a dataset without ``next_obs``
refused before launch; the plan end to end from a dataset the recorder wrote (real Ray,
real Parquet). The slow test learns Pendulum-v1 offline from a SAC run's recording."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import plangraph
from plangraph.algorithms.cql import CQLConfig
from plangraph.algorithms.cql.policy import CQLPolicy, conservative_gap
from plangraph.algorithms.sac import SACConfig
from plangraph.algorithms.sac.policy import SACPolicy
from plangraph.errors import BuildError
from plangraph.rl import SampleBatch

ROOT = Path(__file__).resolve().parent.parent
PENDULUM = gym.make("Pendulum-v1")
OBS, ACT = PENDULUM.observation_space, PENDULUM.action_space


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Small MLPs gain nothing from intra-op threads; on 2 shared cores they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _transitions(rows: int, seed: int = 0, action: float | None = None) -> SampleBatch:
    """Pendulum-shaped transitions; every action ``action`` (env units) when given."""
    rng = np.random.default_rng(seed)
    actions = (
        np.full((rows, 1), action, np.float32)
        if action is not None
        else rng.uniform(-2.0, 2.0, (rows, 1)).astype(np.float32)
    )
    return SampleBatch(
        {
            "obs": rng.uniform(-1.0, 1.0, (rows, 3)).astype(np.float32),
            "next_obs": rng.uniform(-1.0, 1.0, (rows, 3)).astype(np.float32),
            "actions": actions,
            "rewards": rng.normal(size=rows).astype(np.float32),
            "terminateds": np.zeros(rows, dtype=bool),
            "truncateds": np.zeros(rows, dtype=bool),
        }
    )


# -- the conservative term ------------------------------------------------------------------


def test_the_gap_is_the_papers_importance_sampled_logsumexp_minus_q_of_the_data() -> None:
    """One critic, two rows, one sample of each kind, D = 1 (uniform density 1/2):

    row 0: x = [Q(u) - log(1/2), Q(y') - log pi(y'|s'), Q(y) - log pi(y|s)]
             = [1 + log 2, 0 - 0.3, 2 + 0.5]
    row 1: x = [-1 + log 2, 1 + 1.0, 0.5 - 0.2]
    gap = mean_i logsumexp(x_i) - mean_i Q(s_i, a_i), Q(s, a) = 1.5 and -0.5.
    """
    t = torch.tensor
    gap, lse = conservative_gap(
        q_uniform=t([[[1.0], [-1.0]]]),
        q_curr=t([[[2.0], [0.5]]]),
        logp_curr=t([[-0.5], [0.2]]),
        q_next=t([[[0.0], [1.0]]]),
        logp_next=t([[0.3], [-1.0]]),
        q_data=t([[1.5, -0.5]]),
        action_dim=1,
    )
    row0 = math.log(math.exp(1 + math.log(2)) + math.exp(-0.3) + math.exp(2.5))
    row1 = math.log(math.exp(-1 + math.log(2)) + math.exp(2.0) + math.exp(0.3))
    assert row0 == pytest.approx(2.910168, abs=1e-6)  # log(5.436564 + 0.740818 + 12.182494)
    torch.testing.assert_close(lse, t([[row0, row1]]))
    torch.testing.assert_close(gap, t([(row0 + row1) / 2 - (1.5 - 0.5) / 2]))
    # A temperature T: T * logsumexp(x / T); D = 2: the uniform density is 1/4.
    gap_t, _ = conservative_gap(
        t([[[1.0]]]), t([[[2.0]]]), t([[-0.5]]), t([[[0.0]]]), t([[0.3]]), t([[1.5]]), 2, 2.0
    )
    x = [1 + 2 * math.log(2), -0.3, 2.5]
    expected = 2.0 * math.log(sum(math.exp(v / 2.0) for v in x)) - 1.5
    torch.testing.assert_close(gap_t, t([expected]))


def test_the_gaps_match_an_independent_computation_from_the_policys_networks() -> None:
    """``cql_gaps`` for given draws against the formula evaluated here: each critic's Q of
    ``[obs, y]``, the squashed Gaussian's log-prob from ``N(u; mean, std)`` and the tanh
    Jacobian (Haarnoja et al. 2018, eq. 26), and a logsumexp written out, row by row."""
    policy = CQLPolicy(OBS, ACT, CQLConfig(hiddens=(8, 8)), seed=3)
    g = torch.Generator().manual_seed(1)
    b, n = 3, 2
    obs, next_obs = torch.rand(b, 3, generator=g), torch.rand(b, 3, generator=g)
    uniform = torch.rand(b, n, 1, generator=g) * 2 - 1
    eps_curr, eps_next = torch.randn(b, n, 1, generator=g), torch.randn(b, n, 1, generator=g)
    y_data = torch.rand(b, 1, generator=g) * 2 - 1
    m = policy.model
    critics = [m.q1, m.q2]

    def q(j: int, s: torch.Tensor, y: torch.Tensor) -> float:
        return float(critics[j](torch.cat([s, y]).unsqueeze(0)).detach())

    def draw(s: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, float]:
        mean, log_std = m.pi(s.unsqueeze(0))
        u = mean[0] + log_std[0].exp() * eps
        logp = torch.distributions.Normal(mean[0], log_std[0].exp()).log_prob(u).sum()
        return torch.tanh(u), float(logp - torch.log(1 - torch.tanh(u) ** 2).sum())

    q_data = torch.tensor([[q(j, obs[i], y_data[i]) for i in range(b)] for j in range(2)])
    with torch.no_grad():
        gap, lse = policy.cql_gaps(obs, next_obs, q_data, uniform, eps_curr, eps_next)
        for j in range(2):
            rows = []
            for i in range(b):
                x = [q(j, obs[i], uniform[i, k]) - math.log(0.5) for k in range(n)]
                for k in range(n):
                    y, logp = draw(next_obs[i], eps_next[i, k])
                    x.append(q(j, obs[i], y) - logp)  # Q at s of an action drawn at s'
                    y, logp = draw(obs[i], eps_curr[i, k])
                    x.append(q(j, obs[i], y) - logp)
                rows.append(math.log(sum(math.exp(v) for v in x)))
            assert lse[j].tolist() == pytest.approx(rows, rel=1e-5, abs=1e-5)
            expected = sum(rows) / b - float(q_data[j].mean())
            assert float(gap[j]) == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_the_critics_loss_is_sacs_plus_min_q_weight_times_the_gaps() -> None:
    """Same seed, same draws: ``min_q_weight = 0`` is SAC's critic loss exactly, and the
    loss grows linearly in the weight, by the reported gap."""
    t = SACPolicy(OBS, ACT, SACConfig(hiddens=(16, 16)), seed=0).tensors(_transitions(32))
    sac, _ = SACPolicy(OBS, ACT, SACConfig(hiddens=(16, 16)), seed=0).compute_losses(t)
    losses: dict[float, float] = {}
    for w in (0.0, 1.0, 3.0):
        policy = CQLPolicy(OBS, ACT, CQLConfig(hiddens=(16, 16), min_q_weight=w), seed=0)
        out, stats = policy.compute_losses(t)
        losses[w] = float(out["critic"].detach())
        if w == 1.0:
            one_gap = 2 * stats["cql_gap"]  # the sum over the two critics
            assert stats["cql_loss"] == pytest.approx(one_gap, rel=1e-6)
    assert losses[0.0] == pytest.approx(float(sac["critic"].detach()), rel=1e-6)
    assert losses[1.0] - losses[0.0] == pytest.approx(one_gap, rel=1e-4, abs=1e-5)
    assert losses[3.0] - losses[0.0] == pytest.approx(3 * one_gap, rel=1e-4, abs=1e-5)


def test_the_conservative_term_lowers_q_off_the_data() -> None:
    """Trained on a batch whose every action is 1.0 (y = 0.5), the critics rank the
    recorded action above the other actions by far more with the term than without."""
    batch = _transitions(32, action=1.0)
    grid = torch.linspace(-1.0, 1.0, 21).reshape(-1, 1)

    def margin(weight: float) -> float:
        config = CQLConfig(
            hiddens=(16, 16), min_q_weight=weight, bc_iters=0, lr=3e-3, num_actions=4
        )
        policy = CQLPolicy(OBS, ACT, config, seed=0)
        for _ in range(100):
            policy.learn_on_batch(batch)
        obs = torch.from_numpy(batch["obs"][:8])
        with torch.no_grad():
            q = [float(policy.model.q1(torch.cat([obs, y.expand(8, 1)], -1)).mean()) for y in grid]
        data = q[15]  # y = 0.5
        return data - float(np.mean([v for i, v in enumerate(q) if abs(i - 15) > 2]))

    without, with_term = margin(0.0), margin(5.0)
    assert with_term > without + 1.0, (with_term, without)


def test_the_actor_clones_the_data_for_bc_iters_updates_then_follows_the_critics() -> None:
    policy = CQLPolicy(OBS, ACT, CQLConfig(hiddens=(16, 16), bc_iters=2), seed=0)
    batch = _transitions(32)
    phases = [policy.learn_on_batch(batch)["bc_phase"] for _ in range(4)]
    assert phases == [1.0, 1.0, 0.0, 0.0]
    # bc_log_prob: log N(atanh(y); mean, std) - sum log(1 - y^2), y clamped by 1e-6
    obs = torch.from_numpy(batch["obs"][:5])
    y = torch.tensor([[-1.0], [-0.5], [0.0], [0.7], [1.0]])
    with torch.no_grad():
        got = policy.bc_log_prob(obs, y)
        mean, log_std = policy.model.pi(obs)
        yc = y.clamp(-1 + 1e-6, 1 - 1e-6).double()  # the float32 clamp
        u = 0.5 * torch.log((1 + yc) / (1 - yc))
        normal = torch.distributions.Normal(mean.double(), log_std.double().exp())
        expected = (normal.log_prob(u) - torch.log(1 - yc**2)).sum(-1)
    torch.testing.assert_close(got.double(), expected, rtol=2e-3, atol=2e-3)
    # The number of updates is state: a restored policy goes on after the warm-start.
    other = CQLPolicy(OBS, ACT, CQLConfig(hiddens=(16, 16), bc_iters=2), seed=1)
    other.set_state(policy.get_state())
    assert other.num_updates == 4 and other.learn_on_batch(batch)["bc_phase"] == 0.0


def test_the_lagrangian_raises_alpha_prime_above_the_threshold_and_lowers_it_below() -> None:
    batch = _transitions(32)
    for thresh, rises in ((-100.0, True), (100.0, False)):
        config = CQLConfig(hiddens=(16, 16), lagrangian=True, lagrangian_thresh=thresh)
        policy = CQLPolicy(OBS, ACT, config, seed=0)
        assert set(policy.optimizer_params()) == {"critic", "actor", "alpha", "alpha_prime"}
        stats = [policy.learn_on_batch(batch) for _ in range(3)]
        values = [s["alpha_prime"] for s in stats]
        assert (values[-1] > values[0]) == rises, (thresh, values)
        # the critics' conservative term is alpha' * (gap - thresh), summed over critics
        gap = stats[-1]["cql_gap"]
        assert stats[-1]["cql_loss"] == pytest.approx(2 * values[-1] * (gap - thresh), rel=1e-5)


# -- datasets and the plan ------------------------------------------------------------------


def test_a_dataset_without_next_obs_is_refused_before_launch(tmp_path: Path) -> None:
    from plangraph.rl.offline import ExperienceWriter, record_columns

    batch = _transitions(16)
    del batch["next_obs"]
    batch["eps_id"] = np.zeros(16, dtype=np.int64)
    batch["t"] = np.arange(16, dtype=np.int64)
    writer = ExperienceWriter(str(tmp_path / "data"), metadata={"env": "Pendulum-v1"}, prefix="t")
    for columns in record_columns(batch):
        writer.write(columns)
    writer.close()
    compiled = plangraph.compile(
        ROOT / "plans" / "cql.json", config={"dataset": str(tmp_path / "data")}
    )
    with pytest.raises(BuildError) as err:
        plangraph.build(compiled)
    text = str(err.value)
    assert "node 'read'" in text and "/resources/offline/params/path" in text
    assert "algo 'cql'" in text and "column 'next_obs' is missing" in text


def _record_sac(path: Path, iterations: int, **config: Any) -> dict[str, Any]:
    """Run plans/sac_pendulum.json with ``plangraph run --record``'s recorder."""
    compiled = plangraph.compile(ROOT / "plans" / "sac_pendulum.json", config=config)
    with plangraph.build(compiled, seed=0, record=str(path)) as algo:
        for _ in range(iterations):
            result = algo.train()
    return result


@pytest.mark.usefixtures("ray_session")
def test_the_cql_plan_trains_from_a_dataset_the_recorder_wrote(tmp_path: Path) -> None:
    data = tmp_path / "data"
    recorded = _record_sac(
        data,
        2,
        num_workers=1,
        rollout_fragment_length=32,
        train_steps_per_rollout=2,
        learning_starts=64,
        random_timesteps=64,
        hiddens=[16, 16],
        min_env_steps_per_iter=64,
    )
    rows = recorded["counters"]["num_env_steps_recorded"]
    assert rows >= 128 and sorted(p.suffix for p in data.iterdir()) >= [".json", ".parquet"]
    compiled = plangraph.compile(
        ROOT / "plans" / "cql.json",
        config={"dataset": str(data), "train_batch_size": 32, "hiddens": [16, 16], "bc_iters": 2},
    )
    with plangraph.build(compiled, seed=0, evaluation_interval=4, evaluation_episodes=1) as algo:
        results = [algo.train() for _ in range(4)]
    last = results[-1]
    counters = last["counters"]
    assert counters["num_env_steps_read"] == counters["num_env_steps_trained"] == 4 * 32
    assert counters["num_target_updates"] == 4
    assert last["num_env_steps_sampled"] == 0
    learner = last["learner"]
    assert learner["bc_phase"] == 0.0 and np.isfinite(learner["cql_loss"])
    assert [r["learner"]["bc_phase"] for r in results[:2]] == [1.0, 1.0]
    assert -2000.0 < last["evaluation"]["episode_return_mean"] <= 0.0


# -- learning -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
@pytest.mark.timeout(3600)
def test_cql_learns_pendulum_from_a_recorded_sac_run(tmp_path: Path) -> None:
    """docs/benchmarks.md's learning table: the whole replay of a SAC run (25,600 env
    steps, random actions first), then CQL from it alone; greedy return >= -400."""
    data = tmp_path / "data"
    recorded = _record_sac(data, 25)
    assert recorded["counters"]["num_env_steps_recorded"] == 25_600
    compiled = plangraph.compile(ROOT / "plans" / "cql.json", config={"dataset": str(data)})
    with plangraph.build(
        compiled, seed=0, evaluation_interval=10_000, evaluation_episodes=10
    ) as algo:
        result = algo.run(max_iterations=10_000)
    assert result["evaluation"]["episode_return_mean"] >= -400.0
