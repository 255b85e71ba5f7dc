"""PPO with an LSTM policy on StatelessCartPole (CartPole-v1 without the velocities).

The dataflow is PPO's (``plans/ppo.py``): bulk-sync rollouts concatenated into train
batches, then minibatch SGD epochs::

    rollouts.combine(ConcatBatches(min_batch_size=train_batch_size))
            .for_each(TrainOneStep(workers, num_sgd_iter, sgd_minibatch_size))

What memory changes is in the model (``{"type": "lstm"}``, Hochreiter & Schmidhuber
1997; ``docs/recurrent.md``): each rollout worker carries every sub-env's LSTM state from
step to step and across fragments and resets it when that sub-env's episode ends; the
state before each step travels in the batch, GAE bootstraps from the recurrent value,
and the learner trains on minibatches of whole sequences of at most ``max_seq_len``
steps (padded and masked), each from the state the worker had at its start.

The observation is ``[x, theta]`` only: a policy of one observation cannot tell which way
the pole moves. ``model`` is a config key, so the same plan runs with an MLP
(``--set model='{"type": "mlp"}'``) to show what memory buys; ``tools/train_all.py``
measures both (``ppo_lstm`` and ``ppo_lstm_mlp``).
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    ParallelRollouts,
    StandardMetricsReporting,
    TrainOneStep,
    worker_set,
)

cfg = PlanConfig(
    env="StatelessCartPole",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=64,  # 2 x 8 x 64 = 1024 env steps per rollout item
    train_batch_size=1024,  # env steps per train batch
    num_sgd_iter=6,  # epochs per train batch
    sgd_minibatch_size=256,  # rows per minibatch (whole sequences: about 256)
    lr=5e-4,  # at env step 0, annealed linearly ...
    lr_final=0.0,  # ... to this
    lr_anneal_steps=1_000_000,  # ... at this many env steps sampled
    gamma=0.99,
    gae_lambda=0.95,
    clip_param=0.2,
    entropy_coeff=0.0,
    vf_loss_coeff=0.5,
    model={
        "type": "lstm",
        "hiddens": [64],
        "activation": "tanh",
        "lstm_cell_size": 64,
        "max_seq_len": 16,
        "lstm_use_prev_action": True,
        "lstm_use_prev_reward": False,
    },
    min_iter_time_s=0.0,
)

rollouts = ParallelRollouts(mode="bulk_sync", id="rollouts")
train = rollouts.combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat")).for_each(
    TrainOneStep(
        num_sgd_iter=cfg.num_sgd_iter, sgd_minibatch_size=cfg.sgd_minibatch_size, id="train"
    )
)
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="ppo_lstm",
    description="PPO with an LSTM policy on StatelessCartPole: bulk-sync rollouts carrying "
    "each sub-env's state -> ConcatBatches -> TrainOneStep on whole sequences.",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "ppo",
                "lr": cfg.lr,
                "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, cfg.lr_final]],
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "clip_param": cfg.clip_param,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
                "model": cfg.model,
            },
        )
    },
)
