"""Every built-in operator is one unit: declared in its category's module, implemented in
the mirrored runtime module, found through the registries."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import plangraph.ops
from plangraph.ops import OpFactory, all_ops
from plangraph.ops.builtin import MODULES as DECLARING
from plangraph.ops.registry import CATEGORIES, OpParams

BUILTINS = sorted(name for name, sig in all_ops().items() if sig.builtin)


def test_every_category_has_a_declaring_and_an_implementing_module() -> None:
    from plangraph.runtime.ops import MODULES as IMPLEMENTING

    assert tuple(DECLARING) == CATEGORIES
    assert tuple(IMPLEMENTING) == CATEGORIES
    for category in CATEGORIES:
        assert DECLARING[category].__name__.replace(".ops.builtin.", ".runtime.ops.") == (
            IMPLEMENTING[category].__name__
        )


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_operator_is_complete(name: str) -> None:
    from plangraph.runtime.implementations import LOWERINGS
    from plangraph.runtime.ops import MODULES as IMPLEMENTING

    sig = all_ops()[name]
    declaring = DECLARING[sig.category]
    # params: a frozen model that rejects unknown keys, declared beside the op
    model = sig.params_model
    assert issubclass(model, OpParams) and issubclass(model, BaseModel)
    assert model.model_config.get("frozen") is True
    assert model.model_config.get("extra") == "forbid"
    assert model.__module__ == declaring.__name__
    # signature and docs
    assert sig.category in CATEGORIES
    assert sig.doc.strip(), f"{name} has no documentation"
    for field_name, field in model.model_fields.items():
        assert field.description, f"{name}.{field_name} has no description (units)"
    # the Python builder: declared in the same module, exported from plangraph.ops
    builder = getattr(declaring, name)
    assert isinstance(builder, OpFactory) and builder.name == name
    assert getattr(plangraph.ops, name).name == name
    assert name in plangraph.ops.__all__
    # the implementation, found by category
    impl = LOWERINGS.get(name)
    assert impl is not None, f"built-in {name} has no implementation"
    assert impl.__module__ == IMPLEMENTING[sig.category].__name__


def test_a_builtin_without_implementation_fails_the_walk() -> None:
    """The walk above is not vacuous: removing one implementation is caught."""
    from plangraph.runtime.implementations import LOWERINGS

    assert set(BUILTINS) <= set(LOWERINGS)
    saved = LOWERINGS.pop("Batch")
    try:
        assert not set(BUILTINS) <= set(LOWERINGS)
    finally:
        LOWERINGS["Batch"] = saved
