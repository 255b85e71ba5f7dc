"""Env preprocessing declared in the plan: gymnasium wrappers by registered name.

A worker set's ``wrappers`` is a list of ``{"name": ..., "params": {...}}``, applied in
order around each sub-env on the rollout workers (``wrappers[0]`` innermost). The names
and their params models live here, as data, so the compiler validates them without
importing gymnasium; each kind names its builder as ``"module:function"``
(``builder(env, **params) -> gymnasium.Env``), imported only where envs are made (rollout
workers, and the compiler when it reads the wrapped env's spaces).

Built in (``plangraph/rl/wrappers.py``): ``clip_reward``, ``scale_reward``,
``flatten_observation`` (e.g. a ``Discrete`` observation to its one-hot ``Box``),
``normalize_observation`` (running mean and std pooled over the worker set's rollout
workers, synced with each weight broadcast and saved in checkpoints), ``time_limit`` and
``atari_preprocessing`` (frame skip, grey scale, resize 84x84, frame stack 4: uint8
``[84, 84, 4]`` frames, the Nature CNN's input; needs the ``atari`` extra).
:func:`register_wrapper` adds one; :func:`wrapped_env` applies a list of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from plangraph.text import close_matches

__all__ = ["WrapperKind", "WrapperSpec", "all_wrappers", "register_wrapper", "wrapped_env"]


@dataclass(frozen=True)
class WrapperKind:
    """A registered wrapper: ``name``, its ``params`` model, its ``builder``
    (``builder(env, **params) -> gymnasium.Env``, or ``"module:function"`` text of it,
    imported where envs are made), a one-line ``doc``, and whether it is plangraph's own
    (``builtin``). A user's kind travels to the rollout workers with the run
    (``plangraph.rl.registrations``)."""

    name: str
    params: type[BaseModel]
    builder: str | Callable[..., Any]
    doc: str = ""
    builtin: bool = False


_REGISTRY: dict[str, WrapperKind] = {}


def register_wrapper(kind: WrapperKind) -> WrapperKind:
    """Make ``kind.name`` usable in plans' ``wrappers``. Registering a user's name again
    replaces the earlier kind (a module imported twice).

    Raises:
        ValueError: the name is a built-in wrapper's, or ``builder`` is text that is not
            ``"module:function"``.
    """
    old = _REGISTRY.get(kind.name)
    if old is not None and old.builtin and not kind.builtin:
        raise ValueError(f"{kind.name!r} is a built-in wrapper; register yours under another name")
    if isinstance(kind.builder, str):
        module, sep, func = kind.builder.partition(":")
        if not (module and sep and func):
            raise ValueError(f"builder must be 'module:function', got {kind.builder!r}")
    elif not callable(kind.builder):
        raise ValueError(f"builder must be callable or 'module:function', got {kind.builder!r}")
    _REGISTRY[kind.name] = kind
    return kind


def all_wrappers() -> dict[str, WrapperKind]:
    """The registered wrappers by name."""
    return dict(_REGISTRY)


class WrapperSpec(BaseModel):
    """One wrapper of a worker set's env: a registered ``name`` and its ``params``."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    name: str = Field(description="A registered wrapper (plangraph.ops.wrappers).")
    params: dict[str, Any] = Field(
        default_factory=dict, description="The wrapper's params (defaults apply)."
    )

    @model_validator(mode="after")
    def _known(self) -> WrapperSpec:
        kind = _REGISTRY.get(self.name)
        if kind is None:
            near = close_matches(self.name, _REGISTRY)
            raise PydanticCustomError(
                "unknown_wrapper",
                "unknown wrapper{near}; registered: {known}",
                {
                    "near": f" (did you mean {near[0]!r}?)" if near else "",
                    "known": ", ".join(sorted(_REGISTRY)),
                    "at": "name",
                },
            )
        try:
            kind.params.model_validate(self.params)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise PydanticCustomError(
                "wrapper_params",
                "{msg} (param {where} of wrapper {name})",
                {
                    "name": repr(self.name),
                    "where": repr(where),
                    "msg": first["msg"],
                    "at": "/".join(["params", *(str(p) for p in first["loc"])]),
                },
            ) from None
        return self

    def validated_params(self) -> dict[str, Any]:
        """``params`` with the wrapper's defaults filled in."""
        return _REGISTRY[self.name].params.model_validate(self.params).model_dump()

    def builder(self) -> str | Callable[..., Any]:
        return _REGISTRY[self.name].builder


class _Params(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


class ClipRewardParams(_Params):
    min_reward: float = Field(-1.0, description="Rewards below are raised to it.")
    max_reward: float = Field(1.0, description="Rewards above are lowered to it.")


class ScaleRewardParams(_Params):
    scale: float = Field(gt=0.0, description="Every reward is multiplied by it.")


class FlattenObservationParams(_Params):
    pass


class NormalizeObservationParams(_Params):
    clip: float = Field(10.0, gt=0.0, description="Normalised values are clipped to +-clip.")
    epsilon: float = Field(1e-8, gt=0.0, description="Added to the variance.")


class TimeLimitParams(_Params):
    max_episode_steps: int = Field(ge=1, description="Env steps after which to truncate.")


class AtariPreprocessingParams(_Params):
    # Upper bounds: the compiler creates the wrapped env to read its spaces, and a stack
    # of 10**5 frames would allocate gigabytes there.
    frame_skip: int = Field(
        4, ge=1, le=64, description="Emulator frames per env step (the action repeats; max-pooled)."
    )
    screen_size: int = Field(
        84, ge=1, le=1024, description="Frames are resized to screen_size x screen_size."
    )
    grayscale: bool = Field(True, description="Grey-scale frames (else RGB).")
    frame_stack: int = Field(
        4, ge=1, le=64, description="The last frame_stack frames, stacked on the channel axis."
    )
    noop_max: int = Field(30, ge=0, le=10_000, description="Up to noop_max no-op actions at reset.")
    terminal_on_life_loss: bool = Field(False, description="End the episode on a lost life.")


for _kind in (
    WrapperKind(
        "clip_reward",
        ClipRewardParams,
        "plangraph.rl.wrappers:clip_reward",
        "Clip each reward to [min_reward, max_reward] (gymnasium ClipReward).",
    ),
    WrapperKind(
        "scale_reward",
        ScaleRewardParams,
        "plangraph.rl.wrappers:scale_reward",
        "Multiply each reward by scale (episode returns are reported scaled too).",
    ),
    WrapperKind(
        "flatten_observation",
        FlattenObservationParams,
        "plangraph.rl.wrappers:flatten_observation",
        "Flatten the observation to a 1-D Box; a Discrete one becomes its one-hot encoding "
        "(gymnasium FlattenObservation).",
    ),
    WrapperKind(
        "normalize_observation",
        NormalizeObservationParams,
        "plangraph.rl.wrappers:normalize_observation",
        "Standardise observations by running mean and std pooled over all rollout workers "
        "(synced with each weight broadcast, saved in checkpoints).",
    ),
    WrapperKind(
        "atari_preprocessing",
        AtariPreprocessingParams,
        "plangraph.rl.wrappers:atari_preprocessing",
        "Atari frames as the Nature DQN reads them (Mnih et al. 2015; gymnasium's "
        "AtariPreprocessing + FrameStackObservation): frame skip, grey scale, resize, "
        "frame stack; uint8 [screen_size, screen_size, frame_stack] observations.",
    ),
    WrapperKind(
        "time_limit",
        TimeLimitParams,
        "plangraph.rl.wrappers:time_limit",
        "Truncate episodes after max_episode_steps (gymnasium TimeLimit).",
    ),
):
    register_wrapper(WrapperKind(_kind.name, _kind.params, _kind.builder, _kind.doc, builtin=True))


def wrapped_env(env: Any, wrappers: Sequence[WrapperSpec]) -> Any:
    """``env`` (a ``gymnasium.Env``) inside each of ``wrappers``, the first innermost; each
    builder is imported by its ``"module:function"`` path."""
    for spec in wrappers:
        builder = spec.builder()
        if isinstance(builder, str):
            module, _, func = builder.partition(":")
            builder = getattr(importlib.import_module(module), func)
        env = builder(env, **spec.validated_params())
    return env
