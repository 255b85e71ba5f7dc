"""Open settings types: a plan field whose pydantic model is chosen by a registry.

A worker set's ``policy`` (``{"algo": NAME, ...}``) and a policy's ``model``
(``{"type": NAME, ...}``) are tagged unions whose branches are not known when the plan
models are defined: an algorithm or model type registered later (a user's, from a Python
plan or an ``--import`` module) must be accepted. :class:`OpenSettings` is the
``Annotated`` marker that makes such a field: validation looks the tag up in the live
registry at validation time, and pydantic's errors keep their locations (an unknown name
is reported at the tag's key with a did-you-mean and the registered names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from plangraph.text import close_matches

__all__ = ["OpenSettings"]


class _Spec(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config(self) -> type[BaseModel]: ...

    @property
    def builtin(self) -> bool: ...


class OpenSettings:
    """``Annotated[Base, OpenSettings(...)]``: settings validated by a live registry.

    Args:
        base: the settings models' common base class; an instance of it passes as is.
        tag: the key that names the registered entry (``"algo"``, ``"type"``).
        registry: name -> spec (``.name``, ``.config``, ``.builtin``); read at each
            validation, so later registrations count.
        field: what the value is, for messages (``"a policy"``, ``"a model"``).
        noun: what a registered name is, for messages (``"algorithm"``, ``"model type"``).
        codes: pydantic error types for a value that is not an object and for an unknown
            name (``("policy_type", "unknown_algo")``); the compiler maps them to
            diagnostics.

    In the JSON Schema the field is a placeholder naming each built-in's settings model
    (``x-plangraph-settings``): :mod:`plangraph.ops.schema` puts those models into the
    schema's ``$defs`` and writes the references, since pydantic refuses a ``$ref`` to a
    definition it did not make. The committed schema knows the built-ins only.
    """

    def __init__(
        self,
        *,
        base: type[BaseModel],
        tag: str,
        registry: Mapping[str, _Spec],
        field: str,
        noun: str,
        codes: tuple[str, str],
    ) -> None:
        self.base = base
        self.tag = tag
        self.registry = registry
        self.field = field
        self.noun = noun
        self.codes = codes

    def validate(self, value: Any) -> BaseModel:
        """The registered settings model's instance for ``value``.

        Raises:
            pydantic_core.PydanticCustomError: not an object, no tag, or an unknown name.
            pydantic.ValidationError: settings the registered model refuses.
        """
        if isinstance(value, self.base):
            return value
        not_object, unknown = self.codes
        if not isinstance(value, dict):
            raise PydanticCustomError(
                not_object,
                f'{self.field} is an object {{"{self.tag}": NAME, ...settings}}, got {{kind}}',
                {"kind": type(value).__name__},
            )
        if self.tag not in value:
            raise PydanticCustomError(
                "union_tag_not_found",
                f"has no {self.tag!r} key to say which {self.noun} it is",
                {"discriminator": repr(self.tag), "expected": self._expected()},
            )
        name = value[self.tag]
        spec = self.registry.get(name) if isinstance(name, str) else None
        if spec is None:
            near = close_matches(str(name), self.registry)
            raise PydanticCustomError(
                unknown,
                f"unknown {self.noun} {{tag}}{{near}}; registered: {{known}}",
                {
                    "tag": repr(name),
                    "near": f" (did you mean {near[0]!r}?)" if near else "",
                    "known": ", ".join(sorted(self.registry)),
                    "expected": self._expected(),
                    "at": self.tag,
                },
            )
        return spec.config.model_validate(value)

    def _expected(self) -> str:
        return ", ".join(repr(n) for n in sorted(self.registry))

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            self.validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v, info: v.model_dump(mode=info.mode, by_alias=info.by_alias),
                info_arg=True,
            ),
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        refs = {
            name: spec.config.__name__
            for name, spec in sorted(self.registry.items())
            if spec.builtin
        }
        return {"x-plangraph-settings": {"tag": self.tag, "mapping": refs}}
