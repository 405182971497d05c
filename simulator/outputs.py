"""Output files and printed results: every output path checked before the work (its folder exists, a file can
be created there, it is not one of the inputs), files written atomically (a temporary file beside the
target, then renamed, so a failure never leaves a half-written file behind), results checked finite."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from simulator.errors import InputError


def check_outputs(outputs: Mapping[str, str | Path | None], inputs: Iterable[str | Path | None] = ()) -> None:
    """Refuse, before any work, an output (``{"--html": path}``) that cannot be written, that is a folder, that
    is one of the ``inputs`` or that another output also names."""
    given = {flag: Path(path) for flag, path in outputs.items() if path is not None}
    sources = [Path(p) for p in inputs if p is not None and Path(p).is_file()]
    seen: dict[Path, str] = {}
    for flag, path in given.items():
        _check_writable(flag, path)
        for source in sources:
            if _same(path, source):
                raise InputError(f"{flag} {path}: that is an input of this command; choose another output file")
        key = path.resolve()
        if key in seen:
            raise InputError(f"{flag} {path}: {seen[key]} writes the same file; give them different files")
        seen[key] = flag


def _check_writable(flag: str, path: Path) -> None:
    folder = path.parent
    if path.is_dir():
        raise InputError(f"{flag} {path}: is a folder; give a file name")
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: folder {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".probe")
    except OSError as err:
        raise InputError(f"{flag} {path}: cannot write in {folder} ({err.strerror or err})") from None
    os.close(fd)
    os.unlink(probe)


def _same(a: Path, b: Path) -> bool:
    if a.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically; an OS error is bad input (one line, exit 2), not a traceback."""
    _write_atomic(Path(path), text)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, as :func:`write_text_atomic` writes text."""
    _write_atomic(Path(path), data)


def _write_atomic(path: Path, data: str | bytes) -> None:
    if not path.parent.is_dir():
        raise InputError(f"{path}: folder {path.parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise InputError(f"{path}: cannot write in {path.parent} ({err.strerror or err})") from None
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as err:
        raise InputError(f"{path}: cannot write ({err.strerror or err})") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    """The process umask (mkstemp creates 0600 files; outputs should get the usual permissions)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | Path, document: Any) -> None:
    write_text_atomic(path, _json(document, str(path), indent=None, separators=(",", ":")))


def _json(document: Any, what: str, **options: Any) -> str:
    try:
        return json.dumps(document, allow_nan=False, **options)
    except ValueError:
        check_finite(document, what)
        raise


def check_finite(document: Any, what: str = "result", limit: float = math.inf) -> None:
    """Refuse a result holding inf or NaN (inputs too large for double precision), or a number beyond ``limit``
    (a result no sane input gives), naming where."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{what}{where} is {value}: the inputs are too large to simulate; keep durations and "
                             "sizes within the ranges moesim schema and the program format give")
        if isinstance(value, float) and abs(value) > limit:
            raise InputError(f"{what}{where} is {value:.3g}, beyond {limit:g}: check the profile's figures "
                             "(ceilings, host costs, link) and the scenario's sizes")
        if isinstance(value, Mapping):
            stack.extend((f"{where}.{k}", v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))


MAX_RESULT_US = 1e12  # about 12 days: no decode step, layer or block time gets near it


def dumps(document: Any) -> str:
    """The ``--json`` output form: two-space indent; never Infinity or NaN (refused as bad input)."""
    return _json(document, "result", indent=2)


def written(what: str, path: str | Path, detail: str = "") -> str:
    """The one wording every command uses for an output file: ``report written to r.html (4 figures)``."""
    return f"{what} written to {path}" + (f" ({detail})" if detail else "")


def invocation() -> str:
    """The command line as the user typed it (for report headers)."""
    return "moesim " + " ".join(shlex.quote(arg) for arg in sys.argv[1:])
