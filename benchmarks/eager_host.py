"""The eager layer's host time: measured profiler-free against the profile's per-op host costs.

A bench run with ``--host-costs`` (``kernels_real.bench --modes eager --interleave-eager --host-costs``) measured,
for every eager case, the host time of a plain layer call launched onto an idle GPU (``host_idle_us``; runs
before those: behind a busy GPU, ``host_only_us``; ``calibration.fit_host.host_time``). The profile's
eager host costs (``moesim calibrate --eager-host RUN``: per torch op, from the run's calibration split) predict
it as the sum of the host costs of the ops the builder issues for that call. Per preset and strategy: the
measured host time (median over the token counts), the predicted sum, and the measured eager layer time
against ``moesim validate``'s prediction (median |error| over the token counts). Presets held out of the fit
are marked; their host costs were never fitted.

    PYTHONPATH=. python benchmarks/eager_host.py [RUN] [--profile h200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from calibration.fit_host import host_time, layer_program
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile
from simulator.validation import load_cases, predict_case


def host_sum(profile: Profile, case: dict[str, Any]) -> float:
    """The builder's host µs for one eager layer call of ``case`` under ``profile``."""
    program = layer_program(case, profile)
    host = program.host
    default = {"launch": host.launch_us, "record": host.record_us, "wait": host.wait_us,
               "set_stream": host.set_stream_us}
    return sum(op.host_us if op.host_us is not None else default.get(op.op, 0.0) for op in program.ops)


def rows(profile: Profile, run: Path) -> list[dict[str, Any]]:
    """Per (preset, strategy): measured and predicted host and eager layer times."""
    cases = [c for c in load_cases(run, eager_rerun=False) if c.get("mode") == "eager" and "host_only_us" in c]
    if not cases:
        raise InputError(f"{run}: no eager case with host timings (kernels_real.bench --host-costs)")
    held = set((profile.fit.get("layer") or {}).get("holdout_presets", []))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in cases:
        groups.setdefault((str(c["preset"]), str(c["strategy"])), []).append(c)
    out = []
    for (preset, strategy), group in sorted(groups.items()):
        measured = statistics.median(host_time(c) for c in group)
        predicted = statistics.median(host_sum(profile, c) for c in group)
        eager = [predict_case(profile, c) / c["median_us"] - 1 for c in group]
        out.append({"preset": preset, "strategy": strategy, "held_out": preset in held,
                    "host_only_us": measured, "host_predicted_us": predicted,
                    "idle_gpu": all("host_idle_us" in c for c in group),
                    "eager_median_us": statistics.median(c["median_us"] for c in group),
                    "eager_abs_error": statistics.median(abs(e) for e in eager), "tokens": len(group)})
    return out


def markdown(profile: Profile, run: Path, found: list[dict[str, Any]]) -> str:
    how = "launched onto an idle GPU" if all(r["idle_gpu"] for r in found) else "behind a busy GPU"
    lines = [f"Run: `{run}` (host time: plain layer calls {how}, median over the run's rounds and "
             f"then over its token counts). Profile: {profile.describe()}. Not run on AMD hardware.", "",
             "| preset | strategy | host, measured | host, predicted | off by | eager median (measured) | "
             "eager \\|error\\|, median over tokens |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in found:
        name = f"{r['preset']} (held out)" if r["held_out"] else r["preset"]
        lines.append(f"| {name} | {r['strategy']} | {r['host_only_us']:.0f} µs | {r['host_predicted_us']:.0f} µs | "
                     f"{100 * (r['host_predicted_us'] / r['host_only_us'] - 1):+.1f} % | "
                     f"{r['eager_median_us']:.0f} µs | {100 * r['eager_abs_error']:.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", type=Path,
                    help="bench run with --host-costs (default: the profile's fit.layer.eager_cases)")
    ap.add_argument("--profile", default="h200")

    def report() -> str:
        profile = load_profile(args.profile)
        run = args.run or (profile.fit.get("layer") or {}).get("eager_cases")
        if run is None:
            raise InputError(f"profile {profile.name} names no host-timed run; give RUN")
        return markdown(profile, Path(run), rows(profile, Path(run)))

    args = ap.parse_args(argv)
    return print_or_fail(report)


if __name__ == "__main__":
    sys.exit(main())
