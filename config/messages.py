"""Config error messages from pydantic errors (architecture §6: they never echo a value).

Every message is written from the error's type and context (the expected type, the bound, the
allowed keys), never from its input: the input may be a secret or come from the environment.
Unknown keys get a "did you mean" from the keys the model at that location accepts.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from config.errors import Loc
from config.models import RelaybotConfig

__all__ = ["error_message", "join_union_messages"]

_EXPECTED: dict[str, str] = {
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "int_parsing_size": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "finite_number": "expected a finite number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "string_type": "expected a string",
    "string_unicode": "expected a string",
    "dict_type": "expected a mapping",
    "mapping_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "iterable_type": "expected a list",
    "missing": "missing required key",
}


def error_message(error: Mapping[str, Any], tagged: Loc) -> str:
    """Our message for one pydantic error.

    Args:
        error: one item of ``ValidationError.errors()``.
        tagged: its location as pydantic gives it (union tags included), used to find the
            model of an unknown key.
    """
    kind: str = error["type"]
    context: Mapping[str, Any] = error.get("ctx") or {}
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind in ("value_error", "assertion_error") and "error" in context:
        return str(context["error"])
    if kind == "extra_forbidden":
        return _unknown_key_message(tagged)
    if kind == "literal_error":
        return f"expected one of {context['expected']}"
    if kind == "union_tag_invalid":
        return f"unknown kind (expected one of {context['expected_tags']})"
    if kind == "union_tag_not_found":
        return "missing required key"
    if kind == "greater_than":
        return f"must be greater than {_number(context['gt'])}"
    if kind == "greater_than_equal":
        return f"must be at least {_number(context['ge'])}"
    if kind == "less_than":
        return f"must be less than {_number(context['lt'])}"
    if kind == "less_than_equal":
        return f"must be at most {_number(context['le'])}"
    if kind == "too_short":
        count = context["min_length"]
        return f"needs at least {count} {'entry' if count == 1 else 'entries'}"
    if kind == "too_long":
        return f"allows at most {context['max_length']} entries"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_pattern_mismatch":
        return f"must match the pattern {context['pattern']}"
    # pydantic's own messages describe the expectation, not the input ("Input should be ...").
    text = str(error["msg"])
    return text[:1].lower() + text[1:]


def _number(value: object) -> str:
    """``0.0`` -> ``0``: bounds of float fields read as written in the models."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def join_union_messages(messages: list[str]) -> str:
    """Join the failures of a union's members: ``expected a string or an integer``."""
    unique = list(dict.fromkeys(messages))
    prefix = "expected "
    if all(m.startswith(prefix) for m in unique):
        return prefix + " or ".join(m.removeprefix(prefix) for m in unique)
    return "; ".join(unique)


def _unknown_key_message(tagged: Loc) -> str:
    fields = _fields_at(tagged[:-1])
    key = str(tagged[-1])
    if not fields:
        return "unknown key"
    close = difflib.get_close_matches(key, fields, n=1)
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    return "unknown key (expected one of: " + ", ".join(fields) + ")"


def _fields_at(tagged: Loc) -> list[str]:
    """The keys the model at a (tagged) pydantic location accepts; [] if it is not a model."""
    annotation: Any = RelaybotConfig
    for part in tagged:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
            continue
        origin = typing.get_origin(annotation)
        if origin is dict:
            annotation = typing.get_args(annotation)[1]
        elif origin is list:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = _union_member(annotation, part)
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip ``Annotated[...]`` and ``X | None``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(annotation) if m is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return annotation


def _union_member(annotation: Any, tag: str | int) -> Any:
    """The member of a discriminated union whose ``kind`` is ``tag`` (or ``None``)."""
    for member in typing.get_args(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            kind = member.model_fields.get("kind")
            if kind is not None and tag in typing.get_args(kind.annotation):
                return member
    return None
