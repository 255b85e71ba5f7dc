"""R2D2's settings (torch-free: the compiler validates them).

Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement
Learning" (ICLR 2019): a recurrent Q-network trained from replayed fixed-length
sequences, each stored with the recurrent state the actor had at its start (sec. 3,
"stored state"), whose first ``burn_in`` steps only warm the state up ("burn-in");
n-step double-Q targets under the invertible value rescaling ``h`` (sec. 2, Pohlen et al.
2018); priorities ``eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|`` per sequence.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from plangraph.algorithms.dqn.config import per_worker_epsilon
from plangraph.ops.models import ModelSettings
from plangraph.ops.policies import MAX_N_STEP, AlgorithmConfig, ColumnLayout

__all__ = ["SEQ_LEN", "R2D2Config"]

SEQ_LEN = "seq_len"
"""int32 ``[B]`` column of R2D2's rows: at the first row of a replay sequence, its length
in rows (burn-in included), 0 at every other row (``plangraph.algorithms.r2d2.sequences``)."""


class R2D2Config(AlgorithmConfig):
    """R2D2 (Kapturowski et al. 2019): recurrent Q-learning from replayed sequences with
    stored state, burn-in, value rescaling, n-step double-Q targets and sequence priorities.
    """

    algo: Literal["r2d2"] = "r2d2"
    learns_from: ClassVar[str] = (
        "replayed fixed-length sequences, each with the recurrent state its worker had at "
        "its start (a replay buffer of item 'sequence')"
    )
    capabilities: ClassVar[frozenset[str]] = frozenset({"gradients", "target_network", "replay"})
    recurrent_models: ClassVar[bool] = True
    replay_item: ClassVar[str] = "sequence"
    #: a dataset for it must hold the sequence cuts a rollout worker makes (validate)
    dataset_columns: ClassVar[tuple[str, ...] | None] = ("next_obs", "seq_len")

    activation: Literal["tanh", "relu"] = Field("relu", description="Hidden activation.")
    lr: float = Field(1e-3, gt=0.0, description="Adam learning rate (per optimizer step).")
    grad_clip: float | None = Field(
        40.0, gt=0.0, description="Max global L2 norm of the gradient; None disables clipping."
    )
    double_q: bool = Field(True, description="Select bootstrap actions with the online net.")
    n_step: int = Field(
        5,
        ge=1,
        le=MAX_N_STEP,
        description=(
            "n-step Q-learning targets inside each sequence: up to n discounted rewards, "
            "then the bootstrap gamma**k Q_target of the state k <= n steps later (fewer at "
            "the sequence's end, where the state after its last step is read)."
        ),
    )
    replay_sequence_length: int = Field(
        40,
        ge=2,
        le=10_000,
        description=(
            "Env steps of one stored sequence, burn-in included (the paper's m = 80). A "
            "sequence never crosses an episode end: one that ends earlier is shorter (its "
            "tail is padded and masked in the learner). The lstm model's max_seq_len does "
            "not apply."
        ),
    )
    replay_sequence_overlap: int = Field(
        20,
        ge=0,
        le=9_999,
        description=(
            "Env steps two adjacent sequences of one episode share (the paper's 40); the "
            "last sequence of an episode piece ends at its last step. With overlap >= "
            "burn_in every step after a piece's first burn_in steps is trained on."
        ),
    )
    burn_in: int = Field(
        10,
        ge=0,
        le=9_999,
        description=(
            "First steps of a sequence that only unroll the stored state (no loss, no "
            "gradient; the paper's l = 40). A sequence that starts an episode has no "
            "burn-in: its stored state is the initial one, which no update makes stale."
        ),
    )
    value_rescaling: bool = Field(
        True,
        description=(
            "Targets under h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x and its inverse "
            "(Pohlen et al. 2018): y = h(R + gamma**k h^-1(Q_target)); false: y = R + "
            "gamma**k Q_target."
        ),
    )
    value_rescaling_eps: float = Field(
        1e-3, gt=0.0, le=1.0, description="The eps of h (the paper's 1e-3)."
    )
    priority_eta: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="Sequence priority eta * max |td| + (1 - eta) * mean |td| (paper: 0.9).",
    )
    epsilon_initial: float = Field(1.0, ge=0.0, le=1.0, description="Initial exploration eps.")
    epsilon_final: float = Field(0.02, ge=0.0, le=1.0, description="Final exploration eps.")
    epsilon_timesteps: int = Field(
        10_000, ge=0, description="Env steps sampled over which eps anneals linearly."
    )
    per_worker_epsilon_alpha: float | None = Field(
        None,
        ge=0.0,
        description=(
            "Ape-X per-worker exploration (as dqn's): worker i of N acts with "
            "epsilon ** (1 + alpha * i / (N - 1)); None: every worker uses epsilon."
        ),
    )

    @model_validator(mode="after")
    def _sequence_fits(self) -> R2D2Config:
        if self.replay_sequence_overlap >= self.replay_sequence_length:
            raise ValueError(
                f"replay_sequence_overlap ({self.replay_sequence_overlap}) must be smaller "
                f"than replay_sequence_length ({self.replay_sequence_length})"
            )
        if self.burn_in >= self.replay_sequence_length:
            raise ValueError(
                f"burn_in ({self.burn_in}) must leave steps to train on in a sequence of "
                f"replay_sequence_length {self.replay_sequence_length}"
            )
        return self

    def resolved_model(self, obs_shape: tuple[int, ...]) -> ModelSettings:
        """The model, as one network: Q-values have no separate value head, so a model's
        ``vf_share_layers`` does not apply (read as true: one state, ``h`` and ``c`` for
        the lstm)."""
        model = super().resolved_model(obs_shape)
        if "vf_share_layers" in type(model).model_fields and not getattr(
            model, "vf_share_layers", True
        ):
            return model.model_copy(update={"vf_share_layers": True})
        return model

    def sample_columns(self, obs: tuple[tuple[int, ...], str], dist_inputs: int) -> ColumnLayout:
        """``next_obs`` (the bootstrap observation after a sequence's last row) and
        ``seq_len`` (the stored sequences)."""
        return {"next_obs": obs, SEQ_LEN: ((), "int32")}

    def sequence_notes(self, obs_shape: tuple[int, ...] = ()) -> list[str]:
        """What ``plangraph explain`` says about the sequences and the stored state."""
        length, burn, overlap = (
            self.replay_sequence_length,
            self.burn_in,
            self.replay_sequence_overlap,
        )
        model: Any = self.model
        if model is not None:
            model = self.resolved_model(obs_shape)
        if model is not None and model.recurrent:
            size = model.state_size()
            layout = model.state_layout()
            names = "" if layout is None else f" ({', '.join(layout)})"
            state = (
                f"recurrent model {model.type!r}: the state{names}, "
                + (f"{size} float32" if size is not None else "its size known to the module")
                + " per sub-env, is carried by each rollout worker, reset where a sub-env's "
                "episode ends, and stored with every row; a replayed sequence starts from "
                "the state stored at its first row"
            )
        else:
            kind = "no model" if model is None else f"model {model.type!r}"
            state = f"{kind} without state: each step reads its observation only"
        return [
            f"replayed sequences (R2D2): {length} env steps, burn-in {burn} (no loss; none "
            f"where a sequence starts an episode), {length - burn} trained; adjacent ones "
            f"overlap by {overlap}; none crosses an episode end",
            f"  {state}",
            f"  targets: {self.n_step}-step double-Q with the target network"
            + (
                f", value rescaling h (eps {self.value_rescaling_eps:g})"
                if self.value_rescaling
                else ""
            )
            + f"; priority {self.priority_eta:g} max + {1 - self.priority_eta:g} mean |td|",
        ]

    def worker_set_notes(self, num_workers: int) -> list[str]:
        """The sequences (length, burn-in, overlap, state size) and, with
        ``per_worker_epsilon_alpha``, each rollout worker's exploration."""
        out = self.sequence_notes()
        alpha = self.per_worker_epsilon_alpha
        if alpha is not None:
            eps = [
                per_worker_epsilon(self.epsilon_final, i, num_workers, alpha)
                for i in range(num_workers)
            ]
            shown = ", ".join(f"worker {i + 1}: {e:.3g}" for i, e in enumerate(eps[:8]))
            out.append(f"exploration per rollout worker (Ape-X): {shown}")
        return out
