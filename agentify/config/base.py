"""The base of every config model: camelCase keys on the wire, snake_case in code, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    # The docstring under a field is its description: the docs site's configuration reference is
    # generated from these models (scripts/docs_reference.py).
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
    )
