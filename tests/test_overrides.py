"""``--set`` paths into nodes and resources: they change the compiled plan, are checked
like the plan's own values, and a typo gets a did-you-mean."""

from __future__ import annotations

from pathlib import Path

import pytest

import plangraph
from plangraph import cli

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "plans" / "ppo.json"


def test_a_node_param_path_changes_the_compiled_plan() -> None:
    base = plangraph.compile(PPO)
    assert base.nodes["train"].params.num_sgd_iter == 6
    for key in (
        "nodes.train.num_sgd_iter",
        "train.num_sgd_iter",
        "nodes.train.params.num_sgd_iter",
    ):
        compiled = plangraph.compile(PPO, config={key: 3})
        assert compiled.nodes["train"].params.num_sgd_iter == 3, key
        # Only that value: the rest of the plan compiles as before.
        assert compiled.nodes["train"].params.sgd_minibatch_size == 256
        assert compiled.to_plan().resources == base.to_plan().resources
        assert compiled.diagnostics == ()


def test_a_resource_path_reaches_nested_fields() -> None:
    for key in ("workers.policy.clip_param", "resources.workers.params.policy.clip_param"):
        compiled = plangraph.compile(PPO, config={key: 0.1})
        assert compiled.resources["workers"].params.policy.clip_param == 0.1
    # A config key and a path together: each lands where it says.
    both = plangraph.compile(PPO, config={"num_sgd_iter": 4, "workers.num_envs_per_worker": 3})
    assert both.nodes["train"].params.num_sgd_iter == 4
    assert both.resources["workers"].params.num_envs_per_worker == 3


@pytest.mark.parametrize(
    ("key", "code", "suggestion"),
    [
        ("nodes.trian.num_sgd_iter", "PG117", "train"),
        ("nodes.train.num_sgd_itr", "PG119", "num_sgd_iter"),
        ("trian.num_sgd_iter", "PG117", "train"),
        ("workers.policy.clip_parm", "PG119", "clip_param"),
        ("resources.wrokers.num_workers", "PG117", "workers"),
    ],
)
def test_a_typo_gets_a_did_you_mean(key: str, code: str, suggestion: str) -> None:
    compiled = plangraph.analyze(PPO, config={key: 3})
    assert [(d.code, suggestion in d.suggestions) for d in compiled.errors] == [(code, True)]


def test_a_bad_value_is_checked_and_names_the_set() -> None:
    compiled = plangraph.analyze(PPO, config={"nodes.train.num_sgd_iter": 0})
    [err] = compiled.errors
    assert err.code == "PG140" and err.pointer == "/nodes/train/params/num_sgd_iter"
    assert "the value comes from config={'nodes.train.num_sgd_iter': 0}" in (err.hint or "")
    # a literal as Python spells it, where the command line takes JSON
    compiled = plangraph.analyze(PPO, config={"nodes.train.num_sgd_iter": None})
    assert "config={'nodes.train.num_sgd_iter': None}" in (compiled.errors[0].hint or "")
    compiled = plangraph.analyze(
        PPO, config={"nodes.train.num_sgd_iter": None}, override_syntax="cli"
    )
    assert "--set nodes.train.num_sgd_iter=null" in (compiled.errors[0].hint or "")


def test_a_semantic_error_at_a_value_an_override_set_names_the_set() -> None:
    # PG197 is found by a whole-plan check, not by validating the value itself
    compiled = plangraph.analyze(
        ROOT / "plans" / "r2d2.json",
        config={"resources.replay.params.item": "transition"},
        override_syntax="cli",
    )
    [err] = compiled.errors
    assert err.code == "PG197" and err.pointer == "/resources/replay/params/item"
    assert (err.hint or "").startswith(
        'the value comes from --set resources.replay.params.item="transition"; '
    )
    # a diagnostic about a whole policy is not blamed on one of its fields' override
    compiled = plangraph.analyze(
        ROOT / "plans" / "dqn.json",
        config={
            "resources.workers.params.policy.lr": 0.01,
            "resources.workers.params.policy.model": {"type": "lstm"},
        },
        override_syntax="cli",
    )
    [err] = compiled.errors
    assert err.code == "PG184" and "--set resources.workers.params.policy.lr" not in (
        err.hint or ""
    )
    assert "the value comes from --set resources.workers.params.policy.model=" in (err.hint or "")


def test_replacing_a_reference_read_elsewhere_warns() -> None:
    compiled = plangraph.analyze(PPO, config={"workers.policy.lr": 0.001})
    assert compiled.ok
    [warning] = compiled.warnings
    assert warning.code == "PG108" and "lr_schedule" in warning.message
    assert plangraph.analyze(PPO, config={"lr": 0.001}).warnings == ()


def test_a_runs_saved_plan_takes_paths_and_explains_config_keys() -> None:
    resolved = plangraph.compile(PPO).to_plan()
    assert plangraph.compile(resolved, config={"concat.min_batch_size": 512}).ok
    [err] = plangraph.analyze(resolved, config={"train_batch_size": 512}).errors
    assert err.code == "PG117" and "--set nodes.ID.PARAM=VALUE" in (err.hint or "")


def test_run_takes_the_same_options_and_refuses_a_typo_before_ray(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["run", str(PPO), "-c", "nodes.train.num_sgd_itr=3", "--max-iterations", "1"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "PG119" in err and "did you mean: 'num_sgd_iter'?" in err
    # Refused while compiling: no run header (printed once built), no run directory.
    assert "plangraph run" not in out + err.replace("plangraph run: ", "")
    assert list(tmp_path.iterdir()) == []


def test_two_spellings_of_one_param_with_different_values_are_refused() -> None:
    """``train.x`` and ``nodes.train.x`` name one param: which value wins must not depend
    on the order of the keys; the same value twice is no doubt."""
    for config in (
        {"train.num_sgd_iter": 3, "nodes.train.num_sgd_iter": 4},
        {"nodes.train.num_sgd_iter": 4, "train.num_sgd_iter": 3},
    ):
        [err] = plangraph.analyze(PPO, config=config).errors
        assert err.code == "PG117" and err.pointer == "/nodes/train/params/num_sgd_iter"
        assert "both set /nodes/train/params/num_sgd_iter" in err.message
    same = {"train.num_sgd_iter": 3, "nodes.train.num_sgd_iter": 3}
    assert plangraph.analyze(PPO, config=same).errors == ()
    # one inside the other: the whole policy and one of its fields
    nested = {"workers.policy": {"algo": "ppo", "lr": 0.1}, "workers.policy.lr": 0.2}
    errors = plangraph.analyze(PPO, config=nested).errors
    assert [e.code for e in errors] == ["PG117"]
    assert "both set /resources/workers/params/policy/lr" in errors[0].message


def test_an_unknown_nested_field_lists_its_parents_fields() -> None:
    [err] = plangraph.analyze(PPO, config={"workers.policy.lrr": 0.1}).errors
    assert err.code == "PG119" and err.suggestions == ("lr",)
    assert "policy of WorkerSet resource 'workers' takes: " in (err.hint or "")


def test_a_variant_without_its_tag_says_which_key_is_missing() -> None:
    """Not pydantic's "Unable to extract tag using discriminator 'type'"."""
    [err] = plangraph.analyze(PPO, config={"workers.policy.model": {"hiddens": [8]}}).errors
    assert err.pointer == "/resources/workers/params/policy/model"
    assert "policy.model: has no 'type' key to say which kind it is" in err.message
