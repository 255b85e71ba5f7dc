"""BC, behaviour cloning (MARWIL with beta = 0, Wang et al. 2018; as RLlib's BC), trained
only on a recorded dataset, evaluated online.

Batches of recorded rows streamed from the dataset by Ray Data (shuffled, epoch after
epoch), one optimizer step per batch on the log-likelihood of the recorded actions::

    batches = ReadExperiences(dataset="@offline", batch_size=config["train_batch_size"])
    train_op = batches.for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)

The worker set samples nothing (no ParallelRollouts): it holds the learner, and its env
is the one the dataset must fit (checked before launch) and the one greedy evaluation
plays (``plangraph run ... --evaluation-interval K``). Record a dataset with
``plangraph run plans/ppo.json --record DIR`` and point ``dataset`` at it
(``--set dataset=DIR``); ``docs/offline.md`` has the schema and the figures.
"""

from plangraph import Plan, PlanConfig
from plangraph.ops import (
    ReadExperiences,
    StandardMetricsReporting,
    TrainOneStep,
    offline_data,
    worker_set,
)

cfg = PlanConfig(
    env="CartPole-v1",
    dataset="datasets/cartpole-ppo",  # a recorded dataset folder or URI
    train_batch_size=512,  # rows per optimizer step
    lr=1e-3,
    shuffle_buffer_size=20_000,  # rows
    min_iter_time_s=0.0,
)

batches = ReadExperiences(dataset="@offline", batch_size=cfg.train_batch_size, id="read")
train = batches.for_each(TrainOneStep(id="train"))
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="bc",
    description="BC (behaviour cloning): ReadExperiences (Ray Data) -> TrainOneStep.",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=0,
            num_envs_per_worker=1,
            policy={"algo": "bc", "lr": cfg.lr},
        ),
        "offline": offline_data(
            path=cfg.dataset, shuffle_buffer_size=cfg.shuffle_buffer_size, num_readers=1
        ),
    },
)
