"""Errors that the CLI turns into one line on stderr and exit code 2."""

from __future__ import annotations

from pydantic import ValidationError


class InputError(Exception):
    """Bad user input: a missing file, malformed YAML/JSON, a schema violation, an unknown name."""


def describe_validation_error(err: ValidationError, source: str) -> str:
    """One line naming the source, the first failing field path and what was expected."""
    first = err.errors()[0]
    path = ""
    for part in first["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    message = first["msg"].removeprefix("Value error, ")
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{source}: {path + ': ' if path else ''}{message}{more}"
