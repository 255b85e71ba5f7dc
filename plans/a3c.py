"""A3C, asynchronous advantage actor-critic (Mnih et al. 2016), as in RLlib Flow's ``a3c.py``.

Each rollout worker samples a fragment, postprocesses it (GAE with its own value head)
and computes the actor-critic loss gradients on it with its own copy of the weights; the
driver applies each worker's gradients as they arrive (one Adam step per fragment) and
sends the new weights back to that worker alone, so the workers never wait for each
other::

    grads = AsyncGradients(workers)                       # on the rollout workers
    train_op = grads.for_each(ApplyGradients(workers, update_workers="source"))
    return StandardMetricsReporting(train_op, workers, config)

The gradients a worker sends were computed with the weights it last received; with
``num_async`` requests in flight per worker they lag the learner by a few updates
(``learner/policy_lag`` measures it). The loss is A2C's (``plangraph.rl.a2c``).

Settings (tuned for CartPole-v1 with 2 rollout workers; ``tools/train_all.py`` prints the
learning table).
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import ApplyGradients, AsyncGradients, StandardMetricsReporting, worker_set

cfg = PlanConfig(
    env="CartPole-v1",
    num_workers=2,
    num_envs_per_worker=8,
    rollout_fragment_length=32,  # 8 x 32 = 256 env steps per gradient
    num_async=1,  # gradient requests in flight per worker
    lr=2e-3,  # at env step 0, annealed linearly ...
    lr_final=0.0,  # ... to this
    lr_anneal_steps=600_000,  # ... at this many env steps sampled, then held
    gamma=0.98,
    gae_lambda=0.95,
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    min_env_steps_per_iter=5000,
)

grads = AsyncGradients(num_async=cfg.num_async, id="grads")
train = grads.for_each(ApplyGradients(update_workers="source", id="apply"))
metrics = StandardMetricsReporting(
    train, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="a3c",
    description=(
        "A3C: AsyncGradients (computed on each rollout worker) -> "
        'ApplyGradients(update_workers="source"): new weights to that worker only.'
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            policy={
                "algo": "a2c",
                "lr": cfg.lr,
                "lr_schedule": [[0, cfg.lr], [cfg.lr_anneal_steps, cfg.lr_final]],
                "gamma": cfg.gamma,
                "gae_lambda": cfg.gae_lambda,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
            },
        )
    },
)
