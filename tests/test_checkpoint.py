"""Checkpoints hold data only: the state format round-trips exactly, refuses anything
corrupt, truncated, hand-edited or pickled, and a restored Algorithm learns bit-identically."""

from __future__ import annotations

import hashlib
import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import plangraph
from plangraph.errors import CheckpointError
from plangraph.runtime.checkpoint import ARRAYS_FILE, STATE_FILE, read_state, write_state

PLANS = Path(__file__).resolve().parent.parent / "plans"


def assert_identical(a: Any, b: Any, path: str = "") -> None:
    """Same nesting, key order, types, dtypes, shapes and bits (NaN equals NaN)."""
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            assert_identical(a[k], b[k], f"{path}/{k!r}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{path}/{i}")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.numpy().tobytes() == b.numpy().tobytes(), path
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), path
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), path
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b)), path
    else:
        assert a == b, path


def a_tree() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {
        "weights": {"pi.0.weight": rng.standard_normal((4, 3)).astype(np.float32)},
        "optimizer": {
            "state": {0: {"step": torch.tensor(7.0), "exp_avg": torch.randn(4, 3)}},
            "param_groups": [{"lr": 3e-4, "betas": (0.9, 0.999), "params": [0], "foreach": None}],
        },
        "rng": np.random.default_rng(5).bit_generator.state,  # 128-bit Python ints
        "mt": np.random.MT19937(3).state,  # a uint32 array inside a dict
        "floats": [0.1, -0.0, math.inf, -math.inf, math.nan, 1e308],
        "np_scalars": [np.float32(1.5), np.float64(2.5), np.int64(-3), np.bool_(True)],
        "bools": [True, False, 0, 1],
        "tuple_keys": {(1, "a"): "x", None: 2, 2.5: "y", "$looks_like_a_tag": 1},
        "empty": {"dict": {}, "list": [], "tuple": (), "array": np.zeros((0, 2), np.int8)},
        "strings": np.array(["ab", "c"]),
        "text": "ünïcode \u2603",
        "big": 2**200,
    }


def test_state_tree_round_trips_exactly(tmp_path: Path) -> None:
    tree = a_tree()
    write_state(tmp_path, tree)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ARRAYS_FILE, STATE_FILE]
    json.loads((tmp_path / STATE_FILE).read_text())  # strict JSON: no NaN literals
    assert "NaN" not in (tmp_path / STATE_FILE).read_text()
    back = read_state(tmp_path)
    assert_identical(tree, back)
    # A restored optimizer state is usable by torch (tensors, int keys, tuple betas).
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert isinstance(back["optimizer"]["state"][0]["exp_avg"], torch.Tensor)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": {"b": {1, 2}}}, "state /a/b: cannot store a builtins.set"),
        ({"x": np.array([object()])}, "holds Python objects"),
        ({"f": print}, "cannot store"),
        ({"b": b"bytes"}, "cannot store a builtins.bytes"),
    ],
)
def test_values_that_are_not_data_are_refused(tmp_path: Path, value: Any, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        write_state(tmp_path, value)


def _edit_json(directory: Path, edit: Any) -> None:
    doc = json.loads((directory / STATE_FILE).read_text())
    edit(doc)
    (directory / STATE_FILE).write_text(json.dumps(doc))


CORRUPTIONS = {
    "truncated npz": (
        lambda d: (d / ARRAYS_FILE).write_bytes((d / ARRAYS_FILE).read_bytes()[:100]),
        "SHA-256 differs",
    ),
    "truncated json": (
        lambda d: (d / STATE_FILE).write_text((d / STATE_FILE).read_text()[:50]),
        "not readable JSON",
    ),
    "json not an object": (lambda d: (d / STATE_FILE).write_text("[1, 2]"), "expected an object"),
    "wrong version": (lambda d: _edit_json(d, lambda j: j.update(version=99)), "version 99"),
    "unknown tag": (
        lambda d: _edit_json(d, lambda j: j["tree"].update(x={"$pickle": "cos\nsystem"})),
        "unknown tag '\\$pickle'",
    ),
    "missing array": (
        lambda d: _edit_json(d, lambda j: j["tree"].update(x={"$array": "a999"})),
        "not in arrays.npz",
    ),
    "array twice": (
        lambda d: _edit_json(d, lambda j: j["tree"].update(x={"$array": "a0"})),
        "a second time",
    ),
    "nan literal": (
        lambda d: (d / STATE_FILE).write_text(
            (d / STATE_FILE).read_text().replace('"text"', '"n":NaN,"text"')
        ),
        "not strict JSON",
    ),
    "missing npz": (lambda d: (d / ARRAYS_FILE).unlink(), "cannot read"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupt_or_edited_state_is_refused(tmp_path: Path, name: str) -> None:
    write_state(tmp_path, a_tree())
    corrupt, message = CORRUPTIONS[name]
    corrupt(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        read_state(tmp_path)


def test_an_npz_of_pickled_objects_is_refused_even_with_a_matching_digest(tmp_path: Path) -> None:
    import hashlib

    write_state(tmp_path, {"x": np.zeros(2)})
    np.savez(tmp_path / ARRAYS_FILE, a0=np.array([{"evil": 1}], dtype=object))
    digest = hashlib.sha256((tmp_path / ARRAYS_FILE).read_bytes()).hexdigest()
    _edit_json(tmp_path, lambda j: j.update(arrays_sha256=digest))
    with pytest.raises(CheckpointError, match="not a data-only npz"):
        read_state(tmp_path)


class _RunsCode:
    """Unpickling this calls ``os.system``: what a crafted ``state.pkl`` does."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_pickled_state_is_refused_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    ckpt = tmp_path / "iter_000001"
    ckpt.mkdir()
    (ckpt / "state.pkl").write_bytes(pickle.dumps(_RunsCode(marker)))
    with pytest.raises(CheckpointError, match=r"old pickle format.*can run arbitrary code"):
        read_state(ckpt)
    # The same through the checkpoint loader, both as version 1 and as a forged version 2.
    from plangraph.runtime.algorithm import Checkpoint

    meta = {"plan": "a2c", "iteration": 1, "num_env_steps_sampled": 64, "time_total_s": 1.0}
    for version, message in ((1, "version-1 checkpoint"), (2, "old pickle format")):
        (ckpt / "algorithm.json").write_text(
            json.dumps({**meta, "version": version, "saved_at": 0.0})
        )
        with pytest.raises(CheckpointError, match=message):
            Checkpoint.load(ckpt)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("{", "not readable JSON"),
        ("[]", "valid dictionary"),
        ('{"version": 2}', "plan: Field required"),
        (
            '{"version": 2, "plan": "a2c", "iteration": -1, "num_env_steps_sampled": 0, '
            '"time_total_s": 0.0, "saved_at": 0.0}',
            "iteration: Input should be greater than or equal to 0",
        ),
    ],
)
def test_a_hand_edited_algorithm_json_is_refused(tmp_path: Path, meta: str, message: str) -> None:
    from plangraph.runtime.algorithm import Checkpoint

    (tmp_path / "algorithm.json").write_text(meta)
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.load(tmp_path)


@pytest.mark.usefixtures("ray_session")
def test_restore_in_a_new_algorithm_is_bit_identical(tmp_path: Path) -> None:
    """Save a DQN run (policy, Adam moments, target net, replay buffer, RNGs, counters),
    restore it in a new Algorithm: the state is identical, and the restored learner and
    buffer then do exactly what the original ones do."""
    config = {
        "learning_starts": 64,
        "train_batch_size": 32,
        "rollout_fragment_length": 8,
        "num_envs_per_worker": 2,
        "min_env_steps_per_iter": 0,
        "train_steps_per_rollout": 2,
        "prioritized_replay": True,
    }
    compiled = plangraph.compile(PLANS / "dqn.json", config=config)
    original = plangraph.build(compiled, num_workers=1, seed=4)
    restored = plangraph.build(compiled, num_workers=1, seed=9)
    try:
        for _ in range(12):
            original.train()
        assert original.run_state.counters["num_env_steps_trained"] > 0
        ckpt = original.save(tmp_path / "ckpt")
        restored.restore(ckpt)
        saved = {**original.run_state.get_state(), **original.ctx.get_state()}
        assert_identical(saved, {**restored.run_state.get_state(), **restored.ctx.get_state()})
        assert restored.iteration == original.iteration == 12

        # The next learner steps: the same replay sample and the same update, to the bit.
        buf_a, buf_b = original.ctx.buffer("@replay"), restored.ctx.buffer("@replay")
        pol_a = original.ctx.worker_set("@workers").local_policy
        pol_b = restored.ctx.worker_set("@workers").local_policy
        for _ in range(3):
            batch_a, batch_b = buf_a.sample(32), buf_b.sample(32)
            assert_identical(dict(batch_a.items()), dict(batch_b.items()))
            pol_a.learn_on_batch(batch_a)
            pol_b.learn_on_batch(batch_b)
        assert_identical(pol_a.get_state(), pol_b.get_state())
        # Counters continue from the checkpoint in the restored run.
        r = restored.train()
        assert r["iteration"] == 13
        assert r["num_env_steps_sampled"] > saved["metrics"]["counters"]["num_env_steps_sampled"]
    finally:
        original.stop()
        restored.stop()


@pytest.mark.usefixtures("ray_session")
def test_restore_refuses_a_checkpoint_of_another_plan(tmp_path: Path) -> None:
    a2c = plangraph.build(
        plangraph.compile(PLANS / "a2c.json", config={"num_envs_per_worker": 1}), num_workers=0
    )
    try:
        ckpt = a2c.save(tmp_path / "a2c")
        meta = json.loads((ckpt / "algorithm.json").read_text())
        (ckpt / "algorithm.json").write_text(json.dumps({**meta, "plan": "ppo"}))
        with pytest.raises(CheckpointError, match="checkpoint of plan 'ppo'"):
            a2c.restore(ckpt)
        (ckpt / "algorithm.json").write_text(json.dumps(meta))
        _edit_json(ckpt, lambda j: j["tree"]["policies"].update(nope={}))
        # A consistent checkpoint of a plan with one more resource (its digest matches).
        digest = hashlib.sha256((ckpt / "state.json").read_bytes()).hexdigest()
        (ckpt / "algorithm.json").write_text(json.dumps({**meta, "state_sha256": digest}))
        with pytest.raises(CheckpointError, match="resources \\['nope'\\]"):
            a2c.restore(ckpt)
    finally:
        a2c.stop()


@pytest.mark.usefixtures("ray_session")
def test_a_hand_edited_state_json_is_refused(tmp_path: Path) -> None:
    """state.json is strict JSON, so an edit still parses: algorithm.json's digest of it
    tells the edit apart from the checkpoint that was written."""
    from plangraph.runtime.algorithm import Checkpoint

    a2c = plangraph.build(
        plangraph.compile(PLANS / "a2c.json", config={"num_envs_per_worker": 1}), num_workers=0
    )
    try:
        a2c.train()
        ckpt = a2c.save(tmp_path / "a2c")
    finally:
        a2c.stop()
    Checkpoint.load(ckpt)  # as written: fine
    state_file = ckpt / "state.json"
    text = state_file.read_text()
    assert '"iteration":1,' in text
    state_file.write_text(text.replace('"iteration":1,', '"iteration":50,'))
    with pytest.raises(CheckpointError, match=r"state\.json does not match algorithm\.json"):
        Checkpoint.load(ckpt)
