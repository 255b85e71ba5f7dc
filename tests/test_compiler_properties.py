"""Property tests: random valid plans round-trip, compile clean, and are ordered correctly;
random damage to a plan never makes the compiler raise."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plangraph
from plangraph.ir import Plan

ID_PREFIXES = st.sampled_from(["n", "node_", "Train-", "x.", "_s"])
#: the codes of the checks on what a plan means for the algorithm (semantic_checks.py),
#: how its Concurrently drives the branches (merge_checks.py; e.g. a drawn
#: WaitUntilTimestepsElapsed behind LocalReplay really hangs, PG177), what it asks of
#: the machine (resource_checks.py) and whether its policy can act in the env (PG183/184)
SEMANTIC_CODES = frozenset(
    {"PG170", "PG171", "PG172", "PG173", "PG174", "PG175"}
    | {"PG176", "PG177", "PG178"}
    | {"PG179", "PG180", "PG181"}
    | {"PG182", "PG183", "PG184"}
)
CONFIG_KEYS = st.sampled_from(["train_batch_size", "n", "freq", "k_2", "sgd_iters"])


class _Builder:
    """Grows a type-correct plan from hypothesis draws."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.nodes: dict[str, dict[str, Any]] = {}
        self.config: dict[str, Any] = {}
        self.resources: dict[str, Any] = {
            "workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "ppo"}}}
        }

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def node(self, op: str, inputs: list[str], params: dict[str, Any] | None = None) -> str:
        nid = f"{self.draw(ID_PREFIXES)}{len(self.nodes)}"
        self.nodes[nid] = {"op": op, "inputs": inputs, "params": params or {}}
        return nid

    def value(self, v: Any) -> Any:
        """``v`` itself or a ``${key}`` reference to a config entry holding it."""
        if self.draw(st.booleans()):
            key = self.draw(CONFIG_KEYS)
            if key not in self.config:
                self.config[key] = v
                return "${" + key + "}"
        return v

    def chain(self, src: str, typ: str, depth: int) -> tuple[str, str]:
        """Extend stream ``src`` of type ``typ`` by up to ``depth`` operators."""
        for _ in range(self.draw(st.integers(0, depth))):
            options = {
                "SampleBatch": ["concat", "train", "sgd", "grads", "wait", "batch"],
                "GradInfo": ["apply", "batch"],
                "TrainInfo": ["target", "batch", "wait"],
                "list[GradInfo]": ["average", "flatten"],
                "list[SampleBatch]": ["flatten"],
                "list[TrainInfo]": ["flatten"],
            }[typ]
            choice = self.draw(st.sampled_from(options))
            if choice == "concat":
                n = self.value(self.draw(st.integers(1, 4096)))
                src = self.node("ConcatBatches", [src], {"min_batch_size": n})
            elif choice == "train":
                src, typ = self.node("TrainOneStep", [src]), "TrainInfo"
            elif choice == "sgd":
                p = {
                    "num_sgd_iter": self.value(self.draw(st.integers(1, 30))),
                    "sgd_minibatch_size": self.draw(st.integers(0, 512)),
                }
                src, typ = self.node("TrainOneStep", [src], p), "TrainInfo"
            elif choice == "grads":
                src, typ = self.node("ComputeGradients", [src]), "GradInfo"
            elif choice == "apply":
                p = {"update_workers": self.draw(st.sampled_from([True, False, "source"]))}
                src, typ = self.node("ApplyGradients", [src], p), "TrainInfo"
            elif choice == "target":
                p = {"freq": self.value(self.draw(st.integers(0, 10_000)))}
                src = self.node("UpdateTarget", [src], p)
            elif choice == "wait":
                src = self.node("WaitUntilTimestepsElapsed", [src], {"target": 10})
            elif choice == "batch":
                n = self.value(self.draw(st.integers(1, 8)))
                src, typ = self.node("Batch", [src], {"n": n}), f"list[{typ}]"
            elif choice == "average":
                src, typ = self.node("AverageGradients", [src]), "GradInfo"
            elif choice == "flatten":
                src, typ = self.node("Flatten", [src]), typ[5:-1]
        return src, typ

    def branch(self, depth: int) -> tuple[str, str]:
        if self.draw(st.integers(0, 3)) == 0:  # gradients computed on the rollout workers
            src = self.node("AsyncGradients", [], {"num_async": self.draw(st.integers(1, 3))})
            src, typ = self.chain(src, "GradInfo", depth)
        else:
            mode = self.draw(st.sampled_from(["bulk_sync", "async"]))
            src = self.node("ParallelRollouts", [], {"mode": mode})
            src, typ = self.chain(src, "SampleBatch", depth)
        if depth > 0 and self.draw(st.booleans()):
            # a diamond: duplicate, extend both copies, merge them again
            dup = self.node("Duplicate", [src])
            a, ta = self.chain(dup, typ, depth - 1)
            b, tb = self.chain(dup, typ, depth - 1)
            det = self.draw(st.booleans())
            src = self.node("Union", [a, b], {"deterministic": det})
            typ = ta if ta == tb else "Any"
        return src, typ

    def plan(self) -> Plan:
        branches = [self.branch(3) for _ in range(self.draw(st.integers(1, 3)))]
        if self.draw(st.booleans()):  # a replay pair, driven by the final Concurrently
            self.resources["replay"] = {"kind": "ReplayBuffer", "params": {"capacity": 1000}}
            rollouts = self.node("ParallelRollouts", [])
            store = self.node("StoreToReplay", [rollouts], {"buffer": "@replay"})
            branches.append(self.chain(store, "SampleBatch", 1))
            replay = self.node("LocalReplay", [], {"buffer": "@replay", "batch_size": 32})
            branches.append(self.chain(replay, "SampleBatch", 2))
        heads = [b[0] for b in branches]
        if len(heads) > 1:
            params: dict[str, Any] = {}
            if self.draw(st.booleans()):
                params["output_indexes"] = sorted(
                    self.draw(
                        st.sets(st.integers(0, len(heads) - 1), min_size=1, max_size=len(heads))
                    )
                )
            if self.draw(st.booleans()):
                params["mode"] = "round_robin"
                params["weights"] = [
                    self.draw(st.one_of(st.integers(1, 4), st.just("*"), st.floats(0.5, 3)))
                    for _ in heads
                ]
                if all(w == "*" for w in params["weights"]):
                    params["weights"][0] = 1
            head = self.node("Concurrently", heads, params)
        else:
            head = heads[0]
        out = self.node("StandardMetricsReporting", [head])
        order = self.draw(st.permutations(list(self.nodes)))
        return Plan.from_dict(
            {
                "name": "random",
                "config": self.config,
                "resources": self.resources,
                "nodes": {k: self.nodes[k] for k in order},
                "output": out,
            }
        )


@st.composite
def valid_plans(draw: st.DrawFn) -> Plan:
    return _Builder(draw(st.data())).plan()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_plans())
def test_random_valid_plans(plan: Plan) -> None:
    text = plan.to_json()
    again = Plan.from_json(text)
    assert again == plan
    assert again.to_json() == text
    assert list(again.nodes) == list(plan.nodes)

    compiled = plangraph.analyze(plan)
    # The builder draws type-correct graphs without regard to what they mean for the
    # algorithm (UpdateTarget on ppo, odd batch sizes): only semantic checks may object.
    others = [d.format() for d in compiled.diagnostics if d.code not in SEMANTIC_CODES]
    assert others == []
    assert str(compiled.output_type) == "Result"
    position = {nid: i for i, nid in enumerate(compiled.nodes)}
    assert set(position) == set(plan.nodes)
    for u, v in compiled.graph.edges:
        assert position[u] < position[v]
    for node in compiled.nodes.values():
        assert all(position[i] < position[node.id] for i in node.inputs)
    # the JSON text compiles to the same graph
    assert plangraph.analyze(text).to_json() == compiled.to_json()


def _mutations() -> st.SearchStrategy[Any]:
    junk = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-5, 5),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
        st.just("${nope}"),
        st.just("@nope"),
        st.lists(st.text(max_size=3), max_size=3),
        st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    )
    return junk


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_plans(), st.data())
def test_damaged_plans_never_raise(plan: Plan, data: st.DataObject) -> None:
    doc = json.loads(plan.to_json())
    for _ in range(data.draw(st.integers(1, 4))):
        # walk to a random container and replace, delete or add something
        cur: Any = doc
        path_len = data.draw(st.integers(0, 4))
        for _ in range(path_len):
            if isinstance(cur, dict) and cur:
                k = data.draw(st.sampled_from(sorted(cur)))
                if not isinstance(cur[k], dict | list):
                    break
                cur = cur[k]
            elif isinstance(cur, list) and cur:
                i = data.draw(st.integers(0, len(cur) - 1))
                if not isinstance(cur[i], dict | list):
                    break
                cur = cur[i]
        if isinstance(cur, dict):
            key = data.draw(st.one_of(st.sampled_from(sorted(cur) or ["x"]), st.text(max_size=5)))
            if data.draw(st.booleans()) and key in cur:
                del cur[key]
            else:
                cur[key] = data.draw(_mutations())
        elif isinstance(cur, list):
            cur.append(data.draw(_mutations()))
    compiled = plangraph.analyze(doc)
    for d in compiled.diagnostics:
        assert d.code.startswith("PG") and d.message
    if not compiled.ok:
        assert compiled.errors
    text = json.dumps(doc)
    cut = data.draw(st.integers(0, len(text)))
    broken = plangraph.analyze(text[:cut] + data.draw(st.text(max_size=3)))
    assert isinstance(broken.ok, bool)
