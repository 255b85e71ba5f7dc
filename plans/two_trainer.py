"""Two trainers at once: PPO and DQN on one multi-agent env (RLlib's
``two_trainer_workflow.py``, the RLlib Flow paper's composition example).

``MultiAgentCartPole`` with 2 agents: ``agent_0`` acts with ``ppo_policy``, ``agent_1``
with ``dqn_policy``. One stream of multi-agent rollouts is duplicated into two branches,
each training only its own policy on its own agents' rows::

    r_ppo, r_dqn = ParallelRollouts(workers, mode="bulk_sync").duplicate(n=2)
    dqn_store = r_dqn -> SelectExperiences(["dqn_policy"]) -> StoreToReplay(replay)
    dqn_replay = LocalReplay(replay) -> TrainOneStep(policies=["dqn_policy"])
                                     -> UpdateTarget(policies=["dqn_policy"])
    ppo_train = r_ppo -> SelectExperiences(["ppo_policy"])
                      -> ConcatBatches(agent steps of ppo_policy)
                      -> TrainOneStep(policies=["ppo_policy"], SGD epochs)
    StandardMetricsReporting(Concurrently([ppo_train, dqn_store, dqn_replay],
                             round_robin, weights=[1, 1, k], output_indexes=[0, 2]))

Counters and schedules are per policy: DQN's epsilon anneals over its own agent steps
sampled (``num_agent_steps_sampled/dqn_policy``), its target network syncs every
``target_network_update_freq`` of them, and PPO's learning rate anneals over PPO's.
The result holds ``policies/<id>/episode_return_mean`` per policy (its agent's episodes).

Deviation from RLlib's example: one ``round_robin`` ``Concurrently`` drives the three
branches (RLlib nests DQN's store/replay ``Concurrently`` inside an ``async`` one): a
seeded run is reproducible, and DQN makes ``k`` updates per rollout round however the
PPO branch is paced (a nested union keeps training while its store waits for the PPO
branch at the ``Duplicate``, which holds at most one rollout round).
Settings: the tuned single-agent CartPole settings of ``plans/ppo.py`` and
``plans/dqn.py``, each counted in its own policy's agent steps.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    Concurrently,
    LocalReplay,
    ParallelRollouts,
    SelectExperiences,
    StandardMetricsReporting,
    StoreToReplay,
    TrainOneStep,
    UpdateTarget,
    replay_buffer,
    worker_set,
)

cfg = PlanConfig(
    env="MultiAgentCartPole",
    num_agents=2,
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=16,  # 2 x 8 x 16 = 256 env steps per rollout round
    # PPO branch (agent steps of ppo_policy)
    ppo_train_batch_size=1024,
    num_sgd_iter=10,
    sgd_minibatch_size=256,
    ppo_lr=2e-3,
    ppo_lr_anneal_steps=150_000,
    ppo_gamma=0.98,
    gae_lambda=0.8,
    # DQN branch (agent steps of dqn_policy)
    dqn_train_batch_size=128,
    dqn_train_steps_per_rollout=16,
    buffer_size=100_000,
    learning_starts=1_000,
    target_network_update_freq=1_024,
    dqn_lr=3e-3,
    dqn_gamma=0.99,
    n_step=3,
    exploration_steps=10_000,
    min_env_steps_per_iter=1_000,
)

r_ppo, r_dqn = ParallelRollouts(mode="bulk_sync", id="rollouts").duplicate(2, id="duplicate")

dqn_store = r_dqn.for_each(SelectExperiences(policies=["dqn_policy"], id="select_dqn")).for_each(
    StoreToReplay(buffer="@replay", policies=["dqn_policy"], id="store")
)
dqn_replay = (
    LocalReplay(buffer="@replay", batch_size=cfg.dqn_train_batch_size, id="replay_batches")
    .for_each(
        # One broadcast per round, after its last update (as pass broadcast-coalescing
        # derives for plans/dqn.py; here the PPO trainer also broadcasts, so it is set).
        TrainOneStep(
            policies=["dqn_policy"],
            update_workers_every=cfg.dqn_train_steps_per_rollout,
            id="train_dqn",
        )
    )
    .for_each(
        UpdateTarget(policies=["dqn_policy"], freq=cfg.target_network_update_freq, id="target_dqn")
    )
)
ppo_train = (
    r_ppo.for_each(SelectExperiences(policies=["ppo_policy"], id="select_ppo"))
    .combine(
        ConcatBatches(
            min_batch_size=cfg.ppo_train_batch_size,
            count_steps_by="agent_steps",
            policies=["ppo_policy"],
            id="concat_ppo",
        )
    )
    .for_each(
        TrainOneStep(
            policies=["ppo_policy"],
            num_sgd_iter=cfg.num_sgd_iter,
            sgd_minibatch_size=cfg.sgd_minibatch_size,
            id="train_ppo",
        )
    )
)
# One rotation drives all three branches: per round one rollout round reaches the PPO
# branch and the DQN store (the Duplicate keeps them in lockstep) and the DQN branch
# makes dqn_train_steps_per_rollout updates; only train results are emitted.
train = Concurrently(
    [ppo_train, dqn_store, dqn_replay],
    mode="round_robin",
    output_indexes=[0, 2],
    weights=[1, 1, cfg.dqn_train_steps_per_rollout],
    id="concurrently",
)
metrics = StandardMetricsReporting(
    train, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="two_trainer",
    description=(
        "PPO and DQN at once on MultiAgentCartPole: duplicated multi-agent rollouts, a PPO "
        "branch and a DQN branch with its own replay, under Concurrently."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            env_config={"num_agents": cfg.num_agents},
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policies={
                "ppo_policy": {
                    "algo": "ppo",
                    "lr": cfg.ppo_lr,
                    "lr_schedule": [[0, cfg.ppo_lr], [cfg.ppo_lr_anneal_steps, 0.0]],
                    "gamma": cfg.ppo_gamma,
                    "gae_lambda": cfg.gae_lambda,
                    "clip_param": 0.2,
                    "entropy_coeff": 0.0,
                    "vf_loss_coeff": 0.5,
                },
                "dqn_policy": {
                    "algo": "dqn",
                    "lr": cfg.dqn_lr,
                    "gamma": cfg.dqn_gamma,
                    "epsilon_timesteps": cfg.exploration_steps,
                    "n_step": cfg.n_step,
                },
            },
            policy_mapping={"agent_0": "ppo_policy", "agent_1": "dqn_policy"},
        ),
        "replay": replay_buffer(
            capacity=cfg.buffer_size,
            learning_starts=cfg.learning_starts,
            prioritized=False,
        ),
    },
)
