"""Numpy copies of the MLP policies, for sampling in a rollout worker without torch.

A remote rollout worker only acts: it runs the policy forward on a few rows per vector
step, computes ``V(s)`` for GAE, and loads the weights the learner broadcasts. The learner
alone needs torch (autograd, Adam). Importing torch costs a worker process 1-3 s of CPU
at start-up, more than all of its other start-up work; these classes run the same networks
(``plangraph.rl.models``: ``Linear -> act -> ... -> Linear`` on observations flattened to
float32) with numpy.

Same weights, same networks, same sampling rules as the torch policies (``a2c``, ``ppo``,
``impala``, ``appo``: ``ActorCriticPolicy``; ``dqn``: ``DQNPolicy``), and the same seeded
action RNG; but not the same bits: numpy's matrix products and ``tanh`` round differently
from torch's in the last place (relative differences of about 1e-7), so a run sampled with
these differs from one sampled with the torch policy after a few iterations, like any run
on another BLAS. ``WorkerSet`` uses them for its remote workers where
``numpy_inference_supported`` says so; an in-process worker shares the torch learner.

The weights are ``get_weights()`` of the torch policy (``name -> array``, the model's
``state_dict`` names); a numpy policy has none until ``set_weights`` is called, and acting
before that raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from plangraph.ops.models import MLPModel
from plangraph.ops.policies import (
    A2CConfig,
    APPOConfig,
    DQNConfig,
    IMPALAConfig,
    PolicyConfigModel,
    PPOConfig,
    per_worker_epsilon,
)

_SUPPORTED_CONFIGS: dict[type[Any], tuple[str, ...]] = {
    A2CConfig: ("pi_net", "vf_net"),
    PPOConfig: ("pi_net", "vf_net"),
    IMPALAConfig: ("pi_net", "vf_net"),
    APPOConfig: ("pi_net", "vf_net"),
    DQNConfig: ("q_net",),
}
"""Config class -> the MLPs of its model (``plangraph.rl.models``), by weight-name prefix."""

_COMMON = frozenset(
    {"algo", "lr", "lr_schedule", "gamma", "grad_clip", "hiddens", "activation", "model"}
)
#: the Gaussian head's settings: no effect on a Discrete action space's network
_GAUSSIAN = frozenset({"free_log_std", "log_std_init"})
_VTRACE = frozenset(
    {"entropy_coeff", "vf_loss_coeff", "vtrace_clip_rho_threshold"}
    | {"vtrace_clip_pg_rho_threshold", "vtrace_clip_c_threshold"}
)
_KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "a2c": _COMMON
    | _GAUSSIAN
    | {"gae_lambda", "vf_loss_coeff", "entropy_coeff", "normalize_advantages"},
    "ppo": _COMMON
    | _GAUSSIAN
    | {"gae_lambda", "vf_loss_coeff", "entropy_coeff", "normalize_advantages"}
    | {"clip_param", "vf_clip_param"},
    "dqn": _COMMON
    | {"double_q", "huber_delta", "epsilon_initial", "epsilon_final", "epsilon_timesteps"}
    | {"n_step", "per_worker_epsilon_alpha"},
    "impala": _COMMON | _GAUSSIAN | _VTRACE,
    "appo": _COMMON | _GAUSSIAN | _VTRACE | {"clip_param", "kl_coeff", "kl_target", "use_kl_loss"},
}
"""The fields of each config when its network was written down here: only ``hiddens``,
``activation`` and ``model`` (which must resolve to an MLP, see ``numpy_inference_supported``)
shape it, the others are loss, schedule and exploration settings. A field
added since may describe another network (a CNN, a Gaussian head), so a config with a field
not listed samples with the torch policy (``numpy_inference_supported``)."""


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise ``log softmax`` of float32 ``[B, A]`` logits (numerically stable)."""
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def sample_categorical(
    logits: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One draw per row from ``softmax(logits)`` by inverse CDF.

    Numpy rather than torch: on a few rows per vector step each torch call costs more than
    the arithmetic.

    Args:
        logits: float32 ``[B, A]``.
        rng: the policy's seeded numpy generator.

    Returns:
        ``(actions int64 [B], log-probabilities float32 [B])``.
    """
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    total = e.sum(axis=1, keepdims=True)
    cdf = np.cumsum(e, axis=1)
    actions = (rng.random((logits.shape[0], 1)) * total >= cdf).sum(axis=1)
    np.minimum(actions, logits.shape[1] - 1, out=actions)
    logp = z[np.arange(logits.shape[0]), actions] - np.log(total[:, 0])
    return actions.astype(np.int64, copy=False), logp.astype(np.float32, copy=False)


def linear_epsilon(config: DQNConfig, timestep: int) -> float:
    """DQN's exploration epsilon after ``timestep`` env steps sampled: linear from
    ``epsilon_initial`` to ``epsilon_final`` over ``epsilon_timesteps``, then constant."""
    if config.epsilon_timesteps <= 0:
        return float(config.epsilon_final)
    frac = min(1.0, timestep / config.epsilon_timesteps)
    return float(config.epsilon_initial + frac * (config.epsilon_final - config.epsilon_initial))


def numpy_inference_supported(
    config: PolicyConfigModel, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> bool:
    """Whether ``make_numpy_policy`` can sample for this config and these spaces exactly as
    the torch policy does (up to rounding): a ``Box`` observation space, a ``Discrete``
    action space, and a config of one of the five algorithms whose fields are all known
    here (a field added since may change the network, so such a config samples with torch),
    whose model is an MLP (``plangraph.ops.models.MLPModel``; for actor-critic policies
    with a separate value network, ``vf_share_layers=false``).
    """
    cls = type(config)
    if cls not in _SUPPORTED_CONFIGS:
        return False
    if not isinstance(observation_space, gym.spaces.Box):
        return False
    if not isinstance(action_space, gym.spaces.Discrete):
        return False
    if not set(cls.model_fields) <= _KNOWN_FIELDS.get(config.algo, frozenset()):
        return False
    model = config.resolved_model(tuple(observation_space.shape))
    if not isinstance(model, MLPModel):
        return False
    return config.algo == "dqn" or not model.vf_share_layers


class _MLP:
    """``Linear -> act -> ... -> Linear`` from ``{prefix}.{2i}.weight/bias`` arrays."""

    def __init__(self, prefix: str, sizes: Sequence[int], activation: str) -> None:
        self.prefix = prefix
        self.sizes = tuple(int(s) for s in sizes)  # in, hidden..., out
        self.activation = activation
        self.names = [
            f"{prefix}.{2 * i}.{part}"
            for i in range(len(self.sizes) - 1)
            for part in ("weight", "bias")
        ]
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []

    def shapes(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for i in range(len(self.sizes) - 1):
            out[f"{self.prefix}.{2 * i}.weight"] = (self.sizes[i + 1], self.sizes[i])
            out[f"{self.prefix}.{2 * i}.bias"] = (self.sizes[i + 1],)
        return out

    def load(self, weights: Mapping[str, np.ndarray]) -> None:
        layers = []
        for i in range(len(self.sizes) - 1):
            w = np.asarray(weights[f"{self.prefix}.{2 * i}.weight"], dtype=np.float32)
            b = np.asarray(weights[f"{self.prefix}.{2 * i}.bias"], dtype=np.float32)
            # Stored transposed, contiguous: x @ w_t is one BLAS call without a copy.
            layers.append((np.ascontiguousarray(w.T), b.copy()))
        self.layers = layers

    def forward(self, x: np.ndarray) -> np.ndarray:
        last = len(self.layers) - 1
        for i, (w_t, b) in enumerate(self.layers):
            x = x @ w_t
            x += b
            if i < last:
                x = np.tanh(x, out=x) if self.activation == "tanh" else np.maximum(x, 0, out=x)
        return x


class EpsilonExploration:
    """DQN's epsilon-greedy exploration schedule, shared by ``DQNPolicy`` and its numpy
    copy: ``linear_epsilon`` of the policy's ``global_timestep``, or with
    ``per_worker_epsilon_alpha`` set, the Ape-X epsilon of the rollout worker the copy acts
    for (``per_worker_epsilon``, Horgan et al. 2018 sec. 4.1). Needs ``config``
    (``DQNConfig``) and ``global_timestep`` (env steps) on the class it is mixed into."""

    config: Any
    global_timestep: int

    #: (worker, num_workers) of the rollout worker acting with this copy (Ape-X exploration)
    exploration_worker: tuple[int, int] = (0, 1)

    def set_exploration_worker(self, worker: int, num_workers: int) -> None:
        """This copy acts for rollout worker ``worker`` (0-based) of ``num_workers``: with
        ``per_worker_epsilon_alpha`` set, its epsilon is that worker's Ape-X epsilon.

        Raises:
            ValueError: ``worker`` outside ``[0, num_workers)``.
        """
        if not 0 <= worker < num_workers:
            raise ValueError(f"worker {worker} is not one of {num_workers} rollout workers")
        self.exploration_worker = (int(worker), int(num_workers))

    @property
    def base_epsilon(self) -> float:
        """The annealed epsilon schedule at ``global_timestep`` (env steps sampled)."""
        return linear_epsilon(self.config, self.global_timestep)

    @property
    def epsilon(self) -> float:
        """Exploration epsilon at ``global_timestep``: ``base_epsilon``, or with
        ``per_worker_epsilon_alpha`` that of this copy's rollout worker (Ape-X)."""
        alpha = self.config.per_worker_epsilon_alpha
        if alpha is None:
            return self.base_epsilon
        worker, num_workers = self.exploration_worker
        return per_worker_epsilon(self.base_epsilon, worker, num_workers, alpha)


class NumpyPolicy:
    """Base of the numpy sampling policies: weights, global vars and sampling state, with
    the attributes a ``RolloutWorker`` reads (``num_actions``, ``num_dist_inputs``,
    ``global_timestep``).

    Args:
        observation_space: ``Box`` (any shape and dtype).
        action_space: ``Discrete``.
        config: the policy config (``numpy_inference_supported`` must hold).
        seed: seeds the action sampler exactly as ``TorchPolicy`` does with the same seed.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete,
        config: PolicyConfigModel,
        seed: int = 0,
    ) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.config = config
        self.obs_dim = int(np.prod(observation_space.shape))
        self.num_actions = int(action_space.n)
        #: width of ``action_dist_inputs`` (the categorical logits), as ``ActorCriticPolicy``
        self.num_dist_inputs = self.num_actions
        self.global_timestep = 0
        # TorchPolicy's streams: (action sampling, minibatch shuffling); the second is unused.
        act_seq, _ = np.random.SeedSequence(int(seed)).spawn(2)
        self._action_rng = np.random.default_rng(act_seq)
        model = config.resolved_model(tuple(observation_space.shape))
        hiddens = tuple(model.hiddens)
        outs = {"pi_net": self.num_actions, "vf_net": 1, "q_net": self.num_actions}
        self._nets = {
            prefix: _MLP(prefix, (self.obs_dim, *hiddens, outs[prefix]), model.activation)
            for prefix in _SUPPORTED_CONFIGS[type(config)]
        }
        self._weights: dict[str, np.ndarray] | None = None

    def _flat(self, obs: np.ndarray) -> np.ndarray:
        if self._weights is None:
            raise RuntimeError(
                f"{type(self).__name__}: no weights yet; call set_weights() with the learner's "
                "weights before the first sample()"
            )
        obs = np.asarray(obs)
        return obs.reshape(obs.shape[0], -1).astype(np.float32, copy=False)

    def get_weights(self) -> dict[str, np.ndarray]:
        """The weights last set (``name -> array``; empty before the first ``set_weights``)."""
        return {k: v.copy() for k, v in (self._weights or {}).items()}

    def set_weights(self, weights: Mapping[str, np.ndarray]) -> None:
        """Load ``TorchPolicy.get_weights()`` of a policy with the same config and spaces.

        Raises:
            ValueError: the weight names or shapes do not match these networks.
        """
        expected: dict[str, tuple[int, ...]] = {}
        for net in self._nets.values():
            expected.update(net.shapes())
        if set(weights) != set(expected):
            raise ValueError(
                f"weights do not match the model: missing "
                f"{sorted(set(expected) - set(weights))}, unexpected "
                f"{sorted(set(weights) - set(expected))}"
            )
        for name, shape in expected.items():
            if tuple(np.shape(weights[name])) != shape:
                raise ValueError(
                    f"weight {name!r} has shape {tuple(np.shape(weights[name]))}, model has {shape}"
                )
        for net in self._nets.values():
            net.load(weights)
        self._weights = {k: np.array(weights[k], dtype=np.float32) for k in expected}

    def set_global_vars(self, global_vars: Mapping[str, Any]) -> None:
        """``{"timestep": num_env_steps_sampled}`` (drives DQN's epsilon)."""
        if "timestep" in global_vars:
            self.global_timestep = int(global_vars["timestep"])

    def get_sampling_state(self) -> dict[str, Any]:
        """As ``TorchPolicy.get_sampling_state``: ``weights``, ``global_timestep``,
        ``action_rng``; interchangeable with the torch policy's."""
        return {
            "weights": self.get_weights(),
            "global_timestep": self.global_timestep,
            "action_rng": self._action_rng.bit_generator.state,
        }

    def set_sampling_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``get_sampling_state()`` (of this class or of the torch policy).

        Raises:
            ValueError: the weights do not match these networks.
        """
        self.set_weights(state["weights"])
        self._action_rng.bit_generator.state = state["action_rng"]
        self.set_global_vars({"timestep": state["global_timestep"]})


class NumpyActorCriticPolicy(NumpyPolicy):
    """Categorical policy and value function of ``ActorCriticPolicy`` (a2c, ppo, impala,
    appo), forward in numpy."""

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As ``ActorCriticPolicy.compute_actions``: ``(actions int64 [B],
        {"action_logp": float32 [B], "action_dist_inputs": float32 [B, num_actions]})``
        for ``obs [B, *obs_shape]``."""
        logits = self._nets["pi_net"].forward(self._flat(obs))
        if explore:
            actions, logp = sample_categorical(logits, self._action_rng)
        else:
            actions = logits.argmax(axis=1).astype(np.int64)
            logp = log_softmax(logits)[np.arange(actions.shape[0]), actions]
        return actions, {"action_logp": logp, "action_dist_inputs": logits}

    def compute_values(self, obs: np.ndarray) -> np.ndarray:
        """``V(obs)``: float32 ``[B]`` for observations ``[B, *obs_shape]``."""
        return self._nets["vf_net"].forward(self._flat(obs))[:, 0]


class NumpyDQNPolicy(EpsilonExploration, NumpyPolicy):
    """Epsilon-greedy Q-network of ``DQNPolicy``, forward in numpy."""

    config: DQNConfig

    def compute_actions(
        self, obs: np.ndarray, explore: bool = True
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """As ``DQNPolicy.compute_actions``: greedy actions, each replaced by a uniform
        random one with probability epsilon; ``(actions int64 [B], {})``."""
        q = self.compute_q_values(obs)
        actions = q.argmax(axis=1).astype(np.int64)
        if explore:
            n = actions.shape[0]
            rand = self._action_rng.random(n) < self.epsilon
            if rand.any():
                actions[rand] = self._action_rng.integers(0, self.num_actions, size=int(rand.sum()))
        return actions, {}

    def compute_q_values(self, obs: np.ndarray) -> np.ndarray:
        """Online ``Q(obs, .)``: float32 ``[B, num_actions]``."""
        return self._nets["q_net"].forward(self._flat(obs))


def make_numpy_policy(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    config: PolicyConfigModel,
    seed: int = 0,
) -> NumpyPolicy:
    """The numpy sampling policy for ``config`` (without weights until ``set_weights``).

    Raises:
        ValueError: ``numpy_inference_supported`` does not hold for these arguments.
    """
    if not numpy_inference_supported(config, observation_space, action_space):
        raise ValueError(
            f"no numpy policy for algo={config.algo!r} with {observation_space} and "
            f"{action_space}; sample with the torch policy (plangraph.rl.policies.make_policy)"
        )
    assert isinstance(observation_space, gym.spaces.Box)
    assert isinstance(action_space, gym.spaces.Discrete)
    cls = NumpyDQNPolicy if config.algo == "dqn" else NumpyActorCriticPolicy
    return cls(observation_space, action_space, config, seed)
