"""Atomic output files: written to a temporary file beside the target, then renamed, so a failure never
leaves a half-written file behind."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from simulator.errors import InputError


def write_text_atomic(path: str | Path, text: str) -> None:
    path = Path(path)
    if not path.parent.exists():
        raise InputError(f"{path}: folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask (mkstemp creates 0600 files; outputs should get the usual permissions)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | Path, document: Any) -> None:
    write_text_atomic(path, json.dumps(document, indent=None, separators=(",", ":")))


def dumps(document: Any) -> str:
    """The ``--json`` output form: stable key order, two-space indent."""
    return json.dumps(document, indent=2)


def invocation() -> str:
    """The command line as the user typed it (for report headers)."""
    return "moesim " + " ".join(shlex.quote(arg) for arg in sys.argv[1:])
