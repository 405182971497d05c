"""Wall time of a sweep of many scenarios of a 61-layer model (DeepSeek-V3), serial and on local processes.

Usage: python benchmarks/sweep_speed.py [--scenario F] [--cases N] [--jobs J]
Sweeps load.concurrency = 1..N (default: the README scenario, calibrated h200, DP8 + EP8, 128 cases × 3
strategies, up to 1024 tokens into the MoE) in a fresh process state, checks that the
parallel results equal the serial ones, and prints both wall times (the target: ≥ 100 cases in < 10 s).
"""

from __future__ import annotations

import argparse
import time

from simulator.scenario import load_document
from simulator.sweep import Axis, sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="scenarios/dsv3_h200_dp8.yaml")
    parser.add_argument("--cases", type=int, default=128)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    document = load_document(args.scenario)
    axes = [Axis("load.concurrency", tuple(range(1, args.cases + 1)))]
    timings = {}
    outputs = {}
    for jobs in (args.jobs, 1):  # parallel first, so the serial run cannot warm the workers' memo
        t0 = time.perf_counter()
        outputs[jobs] = sweep(document, axes, args.scenario, jobs=jobs, progress=False)
        timings[jobs] = time.perf_counter() - t0
    same = outputs[1] == outputs[args.jobs]
    layers = outputs[1]["cases"][0]["inputs"]["layers"]
    print(f"{args.cases} cases of a {layers}-layer model ({args.scenario}): serial {timings[1]:.2f} s, "
          f"--jobs {args.jobs} {timings[args.jobs]:.2f} s; parallel results identical to serial: {same}")


if __name__ == "__main__":
    main()
