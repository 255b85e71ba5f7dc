"""MARWIL (Wang et al. 2018; as RLlib's MARWIL): advantage-weighted imitation, trained only
on a recorded dataset, evaluated online.

As ``plans/bc.py``, but each recorded action's log-likelihood is weighted by
``exp(beta * A / c)``, ``A = R - V(s)`` with ``R`` the discounted return to go of its
episode (the reader adds it: a Ray Data groupby on ``eps_id``) and a value head trained
on ``R``; on a dataset mixed from good and poor behaviour it imitates the better
actions more::

    batches = ReadExperiences(dataset="@offline", batch_size=config["train_batch_size"])
    train_op = batches.for_each(TrainOneStep(workers))
    return StandardMetricsReporting(train_op, workers, config)
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
    dataset="datasets/cartpole-mixed",  # a recorded dataset folder or URI
    train_batch_size=512,  # rows per optimizer step
    lr=1e-3,
    # Returns to go of at most 10: the value head fits them within a run, so A = R - V(s)
    # compares actions rather than distances to an episode's end (docs/offline.md; with
    # 0.99 MARWIL fell behind BC on the mixed CartPole dataset).
    gamma=0.9,
    beta=1.0,
    vf_coeff=1.0,
    # c^2 tracks mean[A^2] over about the last 100 batches: with RLlib's 1e-8 it stays at
    # its start (100) while the value head learns, and exp(A / 10) of returns to go of up
    # to 100 saturates at max_weight for good and poor rows alike.
    adv_norm_update_rate=0.01,
    shuffle_buffer_size=20_000,  # rows
    min_iter_time_s=0.0,
)

batches = ReadExperiences(dataset="@offline", batch_size=cfg.train_batch_size, id="read")
train = batches.for_each(TrainOneStep(id="train"))
metrics = StandardMetricsReporting(train, min_iter_time_s=cfg.min_iter_time_s, id="metrics")

plan = Plan.from_builder(
    metrics,
    name="marwil",
    description="MARWIL (advantage-weighted imitation): ReadExperiences -> TrainOneStep.",
    config=cfg,
    resources={
        "workers": worker_set(
            env=cfg.env,
            num_workers=0,
            num_envs_per_worker=1,
            policy={
                "algo": "marwil",
                "lr": cfg.lr,
                "gamma": cfg.gamma,
                "beta": cfg.beta,
                "vf_coeff": cfg.vf_coeff,
                "moving_average_sqd_adv_norm_update_rate": cfg.adv_norm_update_rate,
            },
        ),
        "offline": offline_data(
            path=cfg.dataset, shuffle_buffer_size=cfg.shuffle_buffer_size, num_readers=1
        ),
    },
)
