"""Errors that the CLI turns into one line on stderr and exit code 2, and the one-line wording of pydantic's
validation errors (up to five, each with the value given and, where the schema bounds it, the allowed range)."""

from __future__ import annotations

import math
import re
import sys
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

SHOWN_ERRORS = 5
# a number in exponent form; YAML 1.1 reads it as text unless written like 1.0e+3
EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
_RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "int_parsing_size")
_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


class InputError(Exception):
    """Bad user input: a missing file, malformed YAML/JSON, a schema violation, an unknown name."""


def print_or_fail(make: Callable[[], str]) -> int:
    """Print what ``make`` returns (exit code 0); an :class:`InputError` becomes one line on stderr, code 2."""
    try:
        text = make()
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0


def describe_validation_error(err: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """One line naming the source and, for up to five failing fields, the path and what was expected
    (with ``model``, the allowed range is read from its fields' bounds)."""
    parts = [_describe(e, model) for e in err.errors()[:SHOWN_ERRORS]]
    more = err.error_count() - len(parts)
    return f"{source}: " + "; ".join(parts) + (f" (and {more} more)" if more else "")


def _describe(error: Any, model: type[BaseModel] | None) -> str:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    message = error["msg"].removeprefix("Value error, ")
    given = error.get("input")
    bounds = _field_bounds(model, error["loc"]) if model is not None else {}
    bounds = bounds or {k: v for k, v in (error.get("ctx") or {}).items() if k in dict(_BOUNDS)}
    allowed = " and ".join(f"{sign} {_number(bounds[key])}" for key, sign in _BOUNDS if key in bounds)
    if isinstance(given, float) and not math.isfinite(given):
        message = f"got {given}; expected a finite number" + (f" {allowed}" if allowed else "")
    elif isinstance(given, str) and _numeric_text(given):
        message = (f"got the text {given!r} (YAML reads an exponent as a number only in the form 1.0e+3)"
                   + (f"; expected a number {allowed}" if allowed else ""))
    elif allowed and error["type"] in _RANGE_ERRORS:
        message = f"got {given}; expected a number {allowed}"
    return f"{path + ': ' if path else ''}{message}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _numeric_text(text: str) -> bool:
    """A number in exponent form that YAML 1.1 reads as text (it wants ``1.0e+3``: a '.' and a signed exponent)."""
    return EXPONENT_NUMBER.fullmatch(text.strip()) is not None


def _field_bounds(model: type[BaseModel], loc: tuple[Any, ...]) -> dict[str, Any]:
    """The ge/gt/le/lt bounds of the field at ``loc`` in ``model`` (nested models, lists, optionals)."""
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

    annotation: Any = model
    metadata: list[Any] = []
    for part in loc:
        annotation, metadata = _unwrap(annotation, metadata)
        if isinstance(part, int):
            args = typing.get_args(annotation)
            if not args:
                return {}
            annotation, metadata = args[0], []
            continue
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return {}
        field = annotation.model_fields.get(part)
        if field is None:
            return {}
        annotation, metadata = field.annotation, list(field.metadata)
    _, metadata = _unwrap(annotation, metadata)
    metadata = [inner for m in metadata for inner in (m.metadata if isinstance(m, FieldInfo) else [m])]
    return {key: getattr(m, key) for m in metadata for key, _ in _BOUNDS if getattr(m, key, None) is not None}


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    """``Annotated[X, ...]`` → X with its metadata; ``X | None`` → X."""
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            annotation, *extra = typing.get_args(annotation)
            metadata = metadata + list(extra)
            continue
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if typing.get_origin(annotation) in (typing.Union, type(int | None)) and len(args) == 1:
            annotation = args[0]
            continue
        return annotation, metadata
