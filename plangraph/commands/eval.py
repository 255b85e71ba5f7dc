"""``plangraph eval RUN_DIR|CHECKPOINT``: play the trained agent, greedily, without Ray.

Loads the learner policy of a checkpoint (a run directory's newest, or the one named) with
``plangraph.load_policy``, plays ``--episodes`` greedy episodes on their own seeds
(``--seed``'s evaluation stream) in this process and prints the return statistics;
``--video out.mp4`` records them (``render_mode="rgb_array"``, needs ``plangraph[video]``),
``--render human`` shows them in a window. The env is the one the run trained on (the
checkpoint's ``plan.json``) unless ``--env`` names another; an env registered by a module
or a Python plan file needs ``--import`` (a run directory never makes plangraph import code).
A meta-policy (MAML) is played as saved, before any inner adaptation, and the output says
so (``UNADAPTED``; JSON: ``note``, ``unadapted_meta_policy``).

Exit status: 0 played, 2 usage error (no checkpoint, unknown env, missing video extra).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules

__all__ = ["UNADAPTED", "add_parser", "run"]

UNADAPTED = (
    "note: a meta-learning policy ({algo}): these are the returns of the meta-policy before "
    "any inner adaptation, on the env's own task; what meta-learning aims at is the return "
    "after adapting to a task (MAML: post_adaptation_return_mean in the training results; "
    "tools/eval_maml.py measures it on held-out tasks)"
)
"""What ``eval`` says of a meta-policy's returns (``TrainedPolicy.meta_learning``)."""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "eval",
        help="play a trained agent greedily: return statistics, optionally a video",
        description=(
            "Load the policy of RUN_DIR's newest checkpoint (or of CHECKPOINT), play greedy "
            "episodes on their own seeds in this process (no Ray) and print the return "
            "statistics. --video out.mp4 (or .gif) records them; needs plangraph[video]. "
            "A meta-policy (MAML) is played as saved, before any inner adaptation, and the "
            "output says so."
        ),
    )
    p.add_argument("path", metavar="RUN_DIR|CHECKPOINT", type=Path, help="run or checkpoint")
    p.add_argument(
        "--best",
        action="store_true",
        help="of RUN_DIR, the best checkpoint by its --checkpoint-score (default: the newest)",
    )
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    p.add_argument("--seed", type=int, default=0, help="evaluation seed (default 0)")
    p.add_argument("--env", help="play in this env instead of the run's (same spaces)")
    p.add_argument(
        "--render",
        choices=("rgb_array", "human"),
        help="render mode: rgb_array (frames, for --video) or human (a window)",
    )
    p.add_argument("--video", type=Path, metavar="OUT", help="write the episodes to OUT.mp4/.gif")
    p.add_argument("--fps", type=float, help="video frames per second (default: the env's, or 30)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_import_option(p)
    return p


def _error(msg: str) -> int:
    print(f"plangraph eval: error: {msg}", file=sys.stderr)
    return 2


def _problem(args: argparse.Namespace) -> str | None:
    from plangraph.runtime.video import VIDEO_CODECS

    if args.episodes < 1:
        return f"--episodes {args.episodes}: must be >= 1"
    if not 0 <= args.seed < 2**63:
        return f"--seed {args.seed}: the seed must be an integer in [0, 2**63 - 1]"
    if args.fps is not None and not args.fps > 0:
        return f"--fps {args.fps}: must be > 0"
    if args.video is not None:
        if args.render == "human":
            return "--video records rgb_array frames: drop --render human"
        if args.video.suffix.lower() not in VIDEO_CODECS:
            return f"--video {args.video}: use a {' or '.join(VIDEO_CODECS)} file name"
        parent = args.video.absolute().parent
        if not parent.is_dir() or not os.access(parent, os.W_OK):
            return f"--video {args.video}: cannot write into {parent}"
    if args.render == "rgb_array" and args.video is None:
        return "--render rgb_array makes frames for a video: add --video OUT.mp4"
    return None


def run(args: argparse.Namespace) -> int:
    from plangraph.errors import PlangraphError

    problem = _problem(args) or import_user_modules(args.imports)
    if problem:
        return _error(problem)
    try:
        return _play(args)
    except PlangraphError as exc:  # bad input: one line, no traceback
        return _error(str(exc))


def _play(args: argparse.Namespace) -> int:
    from plangraph.errors import BuildError, CheckpointError
    from plangraph.runtime.trained_policy import load_policy
    from plangraph.runtime.video import VideoWriter, check_video_extra

    render = "rgb_array" if args.video is not None else args.render
    if render == "rgb_array":
        check_video_extra()  # before anything is loaded or played
        # pygame renders gymnasium's classic-control envs; without a display it needs no
        # window for rgb_array frames.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    try:
        agent = load_policy(args.path, env=args.env, best=args.best)
    except (BuildError, CheckpointError) as exc:
        # Names the run registered itself (an env, an algorithm, a model type): say what
        # to --import; a run directory never imports code on its own.
        unregistered = ("not a registered gymnasium env", "unknown algorithm", "unknown model")
        if not any(text in str(exc) for text in unregistered):
            raise
        from plangraph.commands.run_args import RUN_ARGS_FILE, registration_hint

        run_dir = args.path if (args.path / RUN_ARGS_FILE).is_file() else args.path.parent.parent
        raise type(exc)(f"{exc}{registration_hint(run_dir)}") from None
    writer = None
    if args.video is not None:
        probe = agent.env()
        fps = args.fps or float((probe.metadata or {}).get("render_fps") or 30)
        probe.close()
        writer = VideoWriter(args.video, fps)
    try:
        stats = agent.evaluate(
            args.episodes,
            args.seed,
            on_frame=writer.append if writer is not None else None,
            render_mode=render,
            num_envs=1 if render is not None else None,
        )
    except Exception as exc:
        import gymnasium

        if isinstance(exc, gymnasium.error.DependencyNotInstalled):
            from plangraph.runtime.video import INSTALL_HINT

            return _error(f"env {agent.env_id!r} cannot render here ({exc}): {INSTALL_HINT}")
        raise
    finally:
        if writer is not None:
            writer.close()
    report = {
        "checkpoint": str(agent.checkpoint),
        "iteration": agent.iteration,
        "env": agent.env_id,
        "seed": args.seed,
        **stats,
    }
    if writer is not None:
        report["video"] = str(args.video)
        report["video_frames"] = writer.frames
    note = UNADAPTED.format(algo=agent.policy.config.algo) if agent.meta_learning else None
    if note is not None:
        report["unadapted_meta_policy"] = True
        report["note"] = note
    if args.format == "json":
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print(
        f"plangraph eval {agent.checkpoint} (iteration {agent.iteration}, env {agent.env_id}): "
        f"{args.episodes} greedy episode{'s' * (args.episodes != 1)}, seed {args.seed}"
    )
    print(
        f"episode return: mean {stats['episode_return_mean']:.2f} +- "
        f"{stats['episode_return_std']:.2f} (min {stats['episode_return_min']:.2f}, max "
        f"{stats['episode_return_max']:.2f}); episode length mean "
        f"{stats['episode_len_mean']:.1f} env steps"
    )
    if note is not None:
        print(note)
    if writer is not None:
        print(f"video: {args.video} ({writer.frames:,} frames at {writer.fps:g} fps)")
    return 0
