"""The IR: port types, config references, Plan models and their JSON form."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from plangraph.ir import (
    ANY,
    ConfigRef,
    ConfigRefError,
    JSONSyntaxError,
    Node,
    Plan,
    PlanConfig,
    is_assignable,
    join,
    parse_json_with_positions,
    parse_type,
    substitute,
    unify,
)


@pytest.mark.parametrize(
    "text",
    ["SampleBatch", "list[T]", "list[list[GradInfo]]", "Any", "SampleBatch | TrainInfo"],
)
def test_type_text_round_trip(text: str) -> None:
    assert str(parse_type(text)) == text


def test_union_normalisation() -> None:
    t = parse_type("TrainInfo | SampleBatch | TrainInfo")
    assert str(t) == "SampleBatch | TrainInfo"
    assert join([parse_type("SampleBatch")]) == parse_type("SampleBatch")
    assert join([parse_type("SampleBatch"), ANY]) == ANY
    with pytest.raises(ValueError):
        parse_type("list[")


@pytest.mark.parametrize(
    ("actual", "expected", "ok"),
    [
        ("SampleBatch", "SampleBatch", True),
        ("GradInfo", "SampleBatch", False),
        ("Any", "SampleBatch", True),
        ("SampleBatch", "Any", True),
        ("SampleBatch | TrainInfo", "Any", True),
        ("SampleBatch | TrainInfo", "TrainInfo", False),
        ("TrainInfo", "SampleBatch | TrainInfo", True),
        ("list[GradInfo]", "list[GradInfo]", True),
        ("list[GradInfo]", "GradInfo", False),
        ("GradInfo", "list[GradInfo]", False),
        ("list[Any]", "list[GradInfo]", True),
    ],
)
def test_compatibility_rule(actual: str, expected: str, ok: bool) -> None:
    assert is_assignable(parse_type(actual), parse_type(expected)) is ok


def test_generics_bind_by_unification() -> None:
    b: dict = {}
    assert unify(parse_type("T"), parse_type("TrainInfo"), b)
    assert str(substitute(parse_type("list[T]"), b)) == "list[TrainInfo]"
    b = {}
    assert unify(parse_type("list[T]"), parse_type("list[GradInfo]"), b)
    assert str(substitute(parse_type("T"), b)) == "GradInfo"
    assert not unify(parse_type("list[T]"), parse_type("GradInfo"), {})
    b = {}  # a variadic port widens its variable to the union of its inputs
    unify(parse_type("T"), parse_type("SampleBatch"), b)
    unify(parse_type("T"), parse_type("TrainInfo"), b)
    assert str(b["T"]) == "SampleBatch | TrainInfo"
    assert substitute(parse_type("T"), {}) == ANY


def test_config_refs_keep_types_and_evaluate_expressions() -> None:
    cfg = {"train_batch_size": 500, "microbatch_size": 128, "env": "CartPole-v1"}
    assert ConfigRef("${train_batch_size}").evaluate(cfg) == 500
    assert ConfigRef("${env}").evaluate(cfg) == "CartPole-v1"
    ref = ConfigRef("${ceil(train_batch_size / microbatch_size)}")
    assert ref.keys == ("train_batch_size", "microbatch_size")
    assert ref.evaluate(cfg) == 4 and isinstance(ref.evaluate(cfg), int)
    assert ConfigRef("${2 * (microbatch_size + 1)}").evaluate(cfg) == 258


def test_config_ref_errors() -> None:
    with pytest.raises(ConfigRefError) as exc:
        ConfigRef("${train_batch_sise}").evaluate({"train_batch_size": 1})
    assert exc.value.unknown == ("train_batch_sise",)
    assert exc.value.suggestions == ("train_batch_size",)
    with pytest.raises(ConfigRefError, match="unsupported expression"):
        ConfigRef("${__import__('os')}")
    with pytest.raises(ConfigRefError, match="does not parse"):
        ConfigRef("${a +}")
    with pytest.raises(ConfigRefError, match="arithmetic needs a number"):
        ConfigRef("${env * 2}").evaluate({"env": "x"})
    with pytest.raises(ConfigRefError, match="fails"):
        ConfigRef("${a / b}").evaluate({"a": 1, "b": 0})


def test_plan_config_builds_references() -> None:
    cfg = PlanConfig(train_batch_size=512, microbatch_size=64, lr=1e-3)
    assert str(cfg.train_batch_size) == "${train_batch_size}"
    n = math.ceil(cfg.train_batch_size / cfg.microbatch_size)
    assert str(n) == "${ceil(train_batch_size / microbatch_size)}"
    assert str((cfg.microbatch_size + 1) * 2) == "${(microbatch_size + 1) * 2}"
    assert str(2 - (cfg.lr - 1)) == "${2 - (lr - 1)}"
    assert str(-cfg.lr) == "${-lr}"
    assert dict(cfg) == {"train_batch_size": 512, "microbatch_size": 64, "lr": 1e-3}
    with pytest.raises(AttributeError, match="did you mean 'train_batch_size'"):
        _ = cfg.train_batch
    with pytest.raises(TypeError, match="resolved when the plan compiles"):
        bool(cfg.lr)


def _plan() -> Plan:
    return Plan(
        name="p",
        config={"k": 3, "f": 1.0, "nested": {"b": [1, (2, 3)]}},
        nodes={
            "z": Node(op="ParallelRollouts"),
            "a": Node(
                op="Concurrently",
                inputs=("z", "z"),
                params={"weights": (1, 2.5, "*"), "output_indexes": [1], "mode": "round_robin"},
            ),
        },
        output="a",
    )


def test_json_round_trip_is_identity() -> None:
    plan = _plan()
    text = plan.to_json()
    back = Plan.from_json(text)
    assert back == plan
    assert back.to_json() == text
    assert list(back.nodes) == ["z", "a"]  # declaration order kept
    assert back.config["k"] == 3 and isinstance(back.config["k"], int)
    assert back.config["f"] == 1.0 and isinstance(back.config["f"], float)
    assert back.nodes["a"].params["weights"] == (1, 2.5, "*")
    assert back.nodes["a"].inputs == ("z", "z")
    # params keys are written sorted, so the text does not depend on construction order
    assert text.index('"mode"') < text.index('"output_indexes"') < text.index('"weights"')


def test_schema_key_is_editor_metadata() -> None:
    plan = _plan()
    text = plan.to_json(schema_ref="../plangraph/ops/plan.schema.json")
    assert text.startswith('{\n  "$schema": "../plangraph/ops/plan.schema.json",')
    assert Plan.from_json(text) == plan


def test_source_positions_do_not_affect_equality() -> None:
    text = _plan().to_json()
    a = Plan.from_json(text, file="a.json")
    b = Plan.from_json("\n\n" + text, file="b.json")
    assert a == b
    assert a.source is not None and b.source is not None
    la = a.source.locate("/nodes/a/params/mode")
    lb = b.source.locate("/nodes/a/params/mode")
    assert la is not None and lb is not None
    assert (la.file, lb.line - la.line) == ("a.json", 2)
    # a missing key is located at its nearest parent
    assert a.source.locate("/nodes/a/params/nope") == a.source.locate("/nodes/a/params")


def test_positions_and_syntax_errors() -> None:
    value, smap = parse_json_with_positions('{"a": {"b": [1, 2.5]},\n "a": 3}', "x.json")
    assert value == {"a": 3}
    assert str(smap.values["/a"]) == "x.json:2:7"
    assert [p for p, _ in smap.duplicates] == ["/a"]
    with pytest.raises(JSONSyntaxError) as exc:
        parse_json_with_positions('{\n  "a": 1,\n}')
    assert (exc.value.line, exc.value.col) == (3, 1)
    with pytest.raises(JSONSyntaxError, match="NaN"):
        parse_json_with_positions('{"a": NaN}')


def test_plan_rejects_bad_shapes() -> None:
    with pytest.raises(ValidationError):
        Plan(name="p", nodes={"a/b": Node(op="X")}, output="a/b")
    with pytest.raises(ValidationError):
        Node(op="X", params={"s": {1, 2}})
    with pytest.raises(ValidationError):
        Node(op="X", params={"f": float("nan")})
    with pytest.raises(ValidationError):
        Node(op="X", extra=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Plan(name="p", config={"not-an-identifier": 1}, nodes={}, output="a")
