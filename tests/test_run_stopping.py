"""Stop criteria and the result log of ``plangraph run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plangraph.runtime.run_log import RunLog, flatten_scalars, read_results
from plangraph.runtime.stopping import StopCriteria, StopCriterionError, parse_key_values


def test_parse_key_values_json_and_strings() -> None:
    assert parse_key_values(["a=1", "b=0.5", "c=x", "d=[1, 2]"], what="--set") == {
        "a": 1,
        "b": 0.5,
        "c": "x",
        "d": [1, 2],
    }
    # Python's literals as JSON's, as an RLlib user types them.
    assert parse_key_values(["a=None", "b=null", "c=True", "d=False", "e=none"], what="--set") == {
        "a": None,
        "b": None,
        "c": True,
        "d": False,
        "e": "none",
    }


@pytest.mark.parametrize("bad", ["novalue", "=3"])
def test_parse_key_values_rejects_malformed(bad: str) -> None:
    with pytest.raises(StopCriterionError, match="expected KEY=VALUE"):
        parse_key_values([bad], what="--stop")


def test_a_key_given_twice_with_different_values_is_refused() -> None:
    with pytest.raises(StopCriterionError, match="--stop a is given twice, as 1 and then 2"):
        parse_key_values(["a=1", "a=2"], what="--stop")
    assert parse_key_values(["a=1", "a=1"], what="--stop") == {"a": 1}  # no doubt which
    assert parse_key_values(["a=1000", "a=1e3"], what="--stop") == {"a": 1000}
    nan = parse_key_values(["a=NaN", "a=NaN"], what="--stop")["a"]
    assert nan != nan  # NaN twice is one value, though NaN != NaN
    with pytest.raises(StopCriterionError, match="given twice, as 1 and then True"):
        parse_key_values(["a=1", "a=true"], what="--stop")  # 1 == True in Python


def test_stop_criteria_any_met_and_absent_keys() -> None:
    stop = StopCriteria.parse(["episode_return_mean=475", "num_env_steps_sampled=1000"])
    assert stop.met({"num_env_steps_sampled": 10}) is None  # no episode yet: not met
    assert stop.met({"episode_return_mean": 475.0}) == "episode_return_mean = 475 >= 475"
    assert stop.met({"num_env_steps_sampled": 1000, "episode_return_mean": 20.0})
    assert stop.progress({"num_env_steps_sampled": 250}) == pytest.approx(0.25)
    assert stop.progress({"episode_return_mean": 237.5}) == pytest.approx(0.5)


def test_stop_criteria_nested_key() -> None:
    stop = StopCriteria.parse({"timers/train": 0.5})
    assert stop.met({"timers": {"train": 0.7}})
    assert not stop.met({"timers": {}})


def test_unknown_stop_key_is_refused_with_did_you_mean() -> None:
    with pytest.raises(StopCriterionError, match="did you mean episode_return_mean"):
        StopCriteria.parse(["episode_reward_mean=100"])  # RLlib's old name


def test_stop_threshold_must_be_numeric() -> None:
    with pytest.raises(StopCriterionError, match="must be a number"):
        StopCriteria.parse(["episode_return_mean=high"])


def test_run_log_jsonl_and_tensorboard(tmp_path: Path) -> None:
    results = [
        {"iteration": 1, "num_env_steps_sampled": 100, "timers": {"train": 0.1}, "x": float("nan")},
        {"iteration": 2, "num_env_steps_sampled": 200, "timers": {"train": 0.2}},
    ]
    with RunLog(tmp_path) as log:
        for r in results:
            log.write(r)
    lines = (tmp_path / "result.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [1, 2]
    assert json.loads(lines[0])["x"] is None  # NaN is not JSON
    assert read_results(tmp_path)[1]["timers"] == {"train": 0.2}
    assert list(tmp_path.glob("events.out.tfevents.*"))
    # Reopening appends (resume keeps history).
    with RunLog(tmp_path, tensorboard=False) as log:
        log.write({"iteration": 3})
    assert len(read_results(tmp_path)) == 3


def test_flatten_scalars_skips_non_numeric() -> None:
    flat = dict(flatten_scalars({"a": 1, "b": {"c": 2.5, "d": "x"}, "e": True, "f": float("inf")}))
    assert flat == {"a": 1.0, "b/c": 2.5}


def test_per_policy_stop_keys_are_checked() -> None:
    ok = StopCriteria.parse(["policies/dqn_policy/episode_return_mean=450"])
    assert ok.met({"policies": {"dqn_policy": {"episode_return_mean": 451.0}}})
    StopCriteria.parse(["policies/ppo_policy/learner/kl=1"])
    with pytest.raises(StopCriterionError, match="did you mean episode_return_mean"):
        StopCriteria.parse(["policies/dqn_policy/episode_retrun_mean=1"])
    with pytest.raises(StopCriterionError, match="learner is a dict"):
        StopCriteria.parse(["policies/dqn_policy/learner=1"])


def test_a_stop_key_of_a_policy_the_plan_lacks_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from plangraph import cli

    plans = Path(__file__).resolve().parent.parent / "plans"
    argv = ["run", str(plans / "two_trainer.json"), "--max-iterations", "1", "--out"]
    stop = ["--stop", "policies/dqn_polcy/episode_return_mean=1"]
    assert cli.main([*argv, str(tmp_path / "a"), *stop]) == 2
    err = capsys.readouterr().err
    assert "declares no policy 'dqn_polcy'; did you mean dqn_policy" in err
    assert not (tmp_path / "a").exists()
    single = ["run", str(plans / "ppo.json"), "--max-iterations", "1", "--out", str(tmp_path)]
    assert cli.main([*single, "--stop", "policies/p/episode_return_mean=1"]) == 2
    assert "the plan has no policies table" in capsys.readouterr().err
