"""Fit the simulator's communication model to ``kernels_real.distributed.bench_collectives`` measurements.

The simulator (``simulator/workloads/collectives.py``) times a collective as
``latency_us + wire_bytes / (bandwidth_GBps · 1e3)`` with ``wire_bytes`` = ``2(n−1)/n · B`` (all-reduce) or
``(n−1)/n · B`` (even all-to-all), one latency and one bandwidth for both. This module fits those two figures
by least squares on relative error (message sizes span decades) over every measured size of both
collectives and every group size given, and reports the per-collective and per-world fits beside them.
The SM share a collective holds (``sm`` records, covered ones only) is summarised too; the profile's
``link`` section has no field for it (the simulator uses the constant ``COMM_SM``), so it goes to
``fit.link.sm_share``.

``python -m calibration.fit_comm COLLECTIVES.json [...] --profile P --out NEW.json [--json]``: the profile
``P`` with its ``link`` replaced by the fit (``fit.link`` holds the details), written atomically.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import InputError
from simulator.outputs import write_text_atomic
from simulator.profile import load_profile, parse_profile

SCHEMA_PREFIX = "moesim.collectives/"


@dataclass(frozen=True)
class LinkFit:
    """Fitted latency (µs) and per-direction bandwidth (GB/s), with the fit's relative errors."""

    latency_us: float
    bandwidth_GBps: float
    points: int
    median_rel_error: float
    max_rel_error: float


def load_collectives(path: str | Path) -> dict[str, Any]:
    """A ``collectives.json`` document (one-line InputError if missing, malformed or not one)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError) as err:
        raise InputError(f"{p}: cannot read ({err.__class__.__name__})") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{p}: malformed JSON at line {err.lineno}: {err.msg}") from None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(SCHEMA_PREFIX):
        raise InputError(f"{p}: not a bench_collectives document (schema {SCHEMA_PREFIX}N)")
    for i, r in enumerate(doc.get("times") or []):
        for key in ("collective", "world", "wire_bytes", "median_us"):
            if key not in r:
                raise InputError(f"{p}: times[{i}] lacks {key!r}")
    return doc


def fit_link(times: Sequence[dict[str, Any]]) -> LinkFit:
    """Least squares of ``t = latency + wire / (bw · 1e3)`` on relative error over records with
    ``world >= 2``; latency >= 0 and bandwidth > 0 enforced (a negative intercept refits through 0)."""
    pts = [(float(r["wire_bytes"]), float(r["median_us"])) for r in times
           if int(r["world"]) >= 2 and float(r["median_us"]) > 0]
    if len(pts) < 2:
        raise InputError("fitting the link needs >= 2 timed sizes from a group of >= 2 ranks")
    wire, t = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    a = np.stack([np.ones_like(wire), wire], axis=1) / t[:, None]  # rows scaled by 1/t: relative error
    (lat, slope), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if lat < 0:
        lat, slope = 0.0, float(np.sum(wire / t) / np.sum((wire / t) ** 2))
    if slope <= 0:
        raise InputError("the collective times do not grow with message size: no bandwidth to fit")
    rel = np.abs((lat + slope * wire) / t - 1.0)
    return LinkFit(float(lat), float(1.0 / slope / 1e3), len(pts), float(np.median(rel)), float(rel.max()))


def sm_share(sm: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Median SM share over the covered records (overall and per collective), or None without any."""
    covered = [r for r in sm if r.get("covered")]
    if not covered:
        return None
    per = {c: statistics.median(r["sm_share"] for r in covered if r["collective"] == c)
           for c in sorted({r["collective"] for r in covered})}
    return {"value": statistics.median(r["sm_share"] for r in covered), "per_collective": per,
            "records": len(covered), "left_out_uncovered": len(sm) - len(covered)}


def _describe(doc: dict[str, Any]) -> str:
    env = doc.get("env") or {}
    gpu = env.get("device_name") or env.get("backend") or "unknown device"
    return (f"{env.get('world')} x {gpu}, {env.get('comm_backend')} {env.get('nccl_version') or ''}".strip()
            + f", {str(env.get('date', ''))[:10]}")


def link_fit(docs: Sequence[dict[str, Any]], names: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The profile's ``link`` section and the ``fit.link`` report from one or more collectives documents."""
    times = [r for d in docs for r in d.get("times") or []]
    joint = fit_link(times)
    where = "; ".join(f"{n} ({_describe(d)})" for n, d in zip(names, docs, strict=True))
    how = (f"measured: least squares on relative error of latency + wire/bandwidth over {joint.points} "
           f"all-reduce and all-to-all times from {where}; median error {joint.median_rel_error:.1%}, "
           f"max {joint.max_rel_error:.1%}")
    worlds = sorted({int(r["world"]) for r in times if int(r["world"]) >= 2})
    report: dict[str, Any] = {"joint": asdict(joint), "files": list(names)}
    report["per_collective"] = {c: asdict(fit_link([r for r in times if r["collective"] == c]))
                                for c in sorted({r["collective"] for r in times})
                                if sum(1 for r in times if r["collective"] == c and int(r["world"]) >= 2) >= 2}
    report["per_world"] = {str(w): asdict(fit_link([r for r in times if int(r["world"]) == w])) for w in worlds
                           if sum(1 for r in times if int(r["world"]) == w) >= 2}
    report["sm_share"] = sm_share([r for d in docs for r in d.get("sm") or []])
    report["sm_share_note"] = ("the profile's link section has no SM-share field; the simulator uses the constant "
                               "COMM_SM in simulator/workloads/collectives.py")
    link = {"bandwidth_GBps": {"value": joint.bandwidth_GBps, "source": how},
            "latency_us": {"value": joint.latency_us, "source": how},
            "topology": f"measured on {', '.join(_describe(d) for d in docs)} (groups of {worlds} GPUs)"}
    return link, report


def apply(profile_doc: dict[str, Any], docs: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """``profile_doc`` with its link replaced by the fit, ``fit.link`` and ``measurements`` extended."""
    link, report = link_fit(docs, names)
    out = dict(profile_doc)
    out["link"] = link
    out["fit"] = {**(profile_doc.get("fit") or {}), "link": report}
    out["measurements"] = [*(profile_doc.get("measurements") or []), *names]
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry: bad input gives one line on stderr and exit code 2, nothing written."""
    p = argparse.ArgumentParser(prog="python -m calibration.fit_comm", description=__doc__.splitlines()[0])
    p.add_argument("collectives", nargs="+", type=Path, help="collectives.json file(s) of bench_collectives")
    p.add_argument("--profile", required=True, help="profile to start from (name or path)")
    p.add_argument("--out", required=True, type=Path, help="profile JSON to write")
    p.add_argument("--json", action="store_true", help="print the fit report as JSON")
    args = p.parse_args(argv)
    try:
        base = load_profile(args.profile)
        docs = [load_collectives(c) for c in args.collectives]
        doc = apply(base.model_dump(mode="json"), docs, [str(c) for c in args.collectives])
        profile = parse_profile(doc, str(args.out))
        write_text_atomic(args.out, json.dumps(profile.model_dump(mode="json"), indent=1) + "\n")
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report = profile.fit["link"]
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        j = report["joint"]
        sm = report["sm_share"]
        print(f"link: latency {j['latency_us']:.2f} µs, bandwidth {j['bandwidth_GBps']:.1f} GB/s per direction "
              f"({j['points']} points, median error {j['median_rel_error']:.1%}); SM share "
              f"{'n/a (no covered probe)' if sm is None else format(sm['value'], '.3f')}; "
              f"source: {', '.join(report['files'])}; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
