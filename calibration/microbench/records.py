"""JSON record builders for ``microbench.json`` and its atomic writer (pure)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from calibration.microbench.accounting import cost

SCHEMA = "moesim.microbench/1"
Spec = dict[str, Any]


def shape_of(spec: Spec) -> dict[str, Any]:
    """The spec without its family (the record's ``shape``); chains keep their ops' shapes."""
    out = {k: v for k, v in spec.items() if k != "family"}
    if spec["op"] == "chain":
        out["ops"] = [{"family": s["family"], **shape_of(s)} for s in spec["ops"]]
    return out


def solo_record(spec: Spec, stats: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """One ``solo`` entry: family, shape, bytes, flops, timing statistics and how they were taken."""
    nbytes, flops = cost(spec)
    rec: dict[str, Any] = {"family": spec["family"], "shape": shape_of(spec), "bytes": nbytes, "flops": flops}
    rec.update(stats)
    rec.setdefault("grid", None)
    rec.setdefault("block", None)
    rec.update(extra)
    return rec


def side_record(spec: Spec, solo_us: float) -> dict[str, Any]:
    nbytes, flops = cost(spec)
    return {"family": spec["family"], "shape": shape_of(spec), "solo_us": solo_us, "bytes": nbytes,
            "flops": flops}


def corun_record(kind: str, a: Spec, b: Spec, med: dict[str, float], n: int, extra: dict[str, Any],
                 first: str | None = None, offset_us: float = 0.0) -> dict[str, Any]:
    """One ``corun`` entry from the medians of the measurements (keys ``a``, ``b``, ``seq``, ``together``,
    ``a_in``, ``b_in``). ``first``: which side was launched first on the device ("a" or "b"; None when both
    started on one event) and ``offset_us`` how much later the other side began (0 when gated)."""
    if first not in (None, "a", "b"):
        raise ValueError(f"first must be 'a', 'b' or None, not {first!r}")
    rec = {"kind": kind, "a": side_record(a, med["a"]), "b": side_record(b, med["b"]),
           "together_us": med["together"], "a_us_in_corun": med["a_in"], "b_us_in_corun": med["b_in"],
           "sequential_us": med["seq"], "n": n, "first": first, "offset_us": offset_us}
    rec["slowdown_a"] = med["a_in"] / med["a"] if med["a"] > 0 else None
    rec["slowdown_b"] = med["b_in"] / med["b"] if med["b"] > 0 else None
    rec["overlap_gain"] = 1.0 - med["together"] / med["seq"] if med["seq"] > 0 else None
    rec.update(extra)
    return rec


def document(env: dict[str, Any], ceilings: dict[str, Any], solo: list[dict[str, Any]],
             corun: list[dict[str, Any]], host: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    return {"schema": SCHEMA, "env": env, "ceilings": ceilings, "solo": solo, "corun": corun, "host": host,
            "notes": notes}


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
