"""IMPALA (Espeholt et al. 2018) on ALE/Pong-v5 from pixels (needs the ``atari`` extra).

The plan of ``plans/impala.py`` (async rollouts -> per-fragment weight sync ->
ConcatBatches -> Enqueue to a V-trace learner thread, Dequeue its results, under
``Concurrently(mode="async")``) on Atari frames::

    batches = ParallelRollouts(mode="async").for_each(UpdateWorkerWeights())
                                            .combine(ConcatBatches(train_batch_size))
    merged = Concurrently([batches.for_each(Enqueue(learner)), Dequeue(learner)],
                          mode="async", output_indexes=[1])

Preprocessing is declared in the plan and runs on the rollout workers: the
``atari_preprocessing`` wrapper (Mnih et al. 2015: up to 30 no-ops at reset, each action
repeated 4 frames with the last two max-pooled, grey scale, 84x84, the last 4 frames
stacked) gives uint8 ``[84, 84, 4]`` observations, which stay uint8 through the fragment,
the object store and the train batch (28,224 bytes a frame); ``clip_reward`` clips each
reward to [-1, 1]. ``ALE/Pong-v5`` keeps its sticky actions (repeat probability 0.25,
Machado et al. 2018). The policy's model is the default for ``[H, W, C]`` observations:
the Nature CNN (conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512) with the value head on its
trunk.

Settings (RLlib's tuned ``pong-impala``, on 2 rollout workers instead of 32): fragments of
5 envs x 50 env steps, train batches of 500 env steps, lr 5e-4, gradient norm clip 40,
entropy 0.01. ``tools/train_all.py`` knows its task (mean return of the last 100 training
episodes >= 18 within 10,000,000 env steps); it is not trained to that score on the
project's 2-core machine (days at its throughput); ``tools/bench_throughput.py`` measures
its env steps/s.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ConcatBatches,
    Concurrently,
    Dequeue,
    Enqueue,
    ParallelRollouts,
    StandardMetricsReporting,
    UpdateWorkerWeights,
    learner_thread,
    worker_set,
)

cfg = PlanConfig(
    env="ALE/Pong-v5",
    num_workers=2,
    num_envs_per_worker=5,
    rollout_fragment_length=50,  # 5 x 50 = 250 env steps per fragment
    train_batch_size=500,  # env steps per learner update
    num_async=2,  # sample requests in flight per worker
    max_weight_sync_delay=1,  # fragments of one worker between two weight syncs to it
    learner_queue_size=4,  # train batches waiting for the learner (14 MB of frames each)
    num_sgd_iter=1,  # passes over each train batch
    lr=5e-4,
    grad_clip=40.0,
    gamma=0.99,
    entropy_coeff=0.01,
    vf_loss_coeff=0.5,
    min_env_steps_per_iter=10_000,
)

batches = (
    ParallelRollouts(mode="async", num_async=cfg.num_async, id="rollouts")
    .for_each(UpdateWorkerWeights(max_weight_sync_delay=cfg.max_weight_sync_delay, id="sync"))
    .combine(ConcatBatches(min_batch_size=cfg.train_batch_size, id="concat"))
)
enqueue_op = batches.for_each(Enqueue(queue="@learner", id="enqueue"))
dequeue_op = Dequeue(queue="@learner", id="dequeue")
merged = Concurrently([enqueue_op, dequeue_op], mode="async", output_indexes=[1], id="concurrently")
metrics = StandardMetricsReporting(
    merged, min_env_steps_per_iter=cfg.min_env_steps_per_iter, id="metrics"
)

plan = Plan.from_builder(
    metrics,
    name="impala_pong",
    description=(
        "IMPALA on ALE/Pong-v5 from pixels: Atari preprocessing on the workers (uint8 "
        "84x84x4 frames), Nature CNN; async rollouts -> per-actor weight sync -> "
        "ConcatBatches -> Enqueue to a V-trace learner thread, Dequeue its results."
    ),
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=cfg.num_workers,
            num_envs_per_worker=cfg.num_envs_per_worker,
            rollout_fragment_length=cfg.rollout_fragment_length,
            wrappers=[
                {"name": "atari_preprocessing"},
                {"name": "clip_reward", "params": {"min_reward": -1.0, "max_reward": 1.0}},
            ],
            policy={
                "algo": "impala",
                "lr": cfg.lr,
                "grad_clip": cfg.grad_clip,
                "gamma": cfg.gamma,
                "entropy_coeff": cfg.entropy_coeff,
                "vf_loss_coeff": cfg.vf_loss_coeff,
            },
        ),
        "learner": learner_thread(
            inqueue_size=cfg.learner_queue_size, num_sgd_iter=cfg.num_sgd_iter
        ),
    },
)
