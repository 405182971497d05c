"""Simulated kernels per second for a long two-stream fork/join program with device sharing active.

Usage: python benchmarks/engine_speed.py [--pairs N] [--no-host-costs] [--host-spans] [--write-program F.json]
                                        [--bare-simpy]
Each pair: main launches a, records; aux waits and launches b (overlapping c on main, both drawing HBM so
the fluid model re-solves rates), records; main launches c, waits, launches d. Four kernels per pair.
Host costs (launch 0.5 µs, record/wait 0.2 µs; made-up figures, not a calibrated profile) are on unless
``--no-host-costs``. The time measured is ``simulate()`` alone (expansion, event loop, result), best of
``--repeat``; the host timeline (one span per costed host call) is built on first access, so it is not
included unless ``--host-spans``. Parsing is measured end to end by ``benchmarks/sim_end_to_end.py``.
``--bare-simpy`` also times a bare SimPy process yielding 200,000 timeouts (best of ``--repeat``): the
machine's ceiling for one event per kernel, for context (the engine needs ~1.5 SimPy events per kernel here).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import simpy

from simulator.engine import simulate
from simulator.ir import parse_program


def fork_join_program(pairs: int, host_costs: bool = True) -> dict:
    """The benchmark program as a document (single-key ops), ``4 × pairs`` kernels."""
    ops: list[dict] = []
    for i in range(pairs):
        ops += [
            {"launch": {"kernel": "a", "stream": "main", "dur_us": 3.0, "sm": 0.4, "bw": 0.5}},
            {"record": {"event": f"in{i % 2}", "stream": "main"}},
            {"wait": {"stream": "aux", "event": f"in{i % 2}"}},
            {"launch": {"kernel": "b", "stream": "aux", "dur_us": 7.0, "sm": 0.3, "bw": 0.7}},
            {"record": {"event": f"out{i % 2}", "stream": "aux"}},
            {"launch": {"kernel": "c", "stream": "main", "dur_us": 11.0, "sm": 0.8, "bw": 0.6}},
            {"wait": {"stream": "main", "event": f"out{i % 2}"}},
            {"launch": {"kernel": "d", "stream": "main", "dur_us": 2.0, "sm": 0.2, "bw": 0.3}},
        ]
    return {"name": f"fork_join_{pairs}", "streams": {"main": {}, "aux": {}},
            "host": {"launch_us": 0.5, "record_us": 0.2, "wait_us": 0.2} if host_costs else {}, "ops": ops}


def bare_simpy_rate(events: int = 200_000, repeat: int = 3) -> float:
    """Timeouts per second of a bare SimPy process that only yields ``env.timeout(1)``, best of ``repeat``."""
    def process(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1.0)

    best = float("inf")
    for _ in range(repeat):
        env = simpy.Environment()
        env.process(process(env))
        t0 = time.perf_counter()
        env.run()
        best = min(best, time.perf_counter() - t0)
    return events / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-host-costs", action="store_true", help="zero host API costs (device-bound run)")
    parser.add_argument("--host-spans", action="store_true", help="also build the host timeline (timed)")
    parser.add_argument("--write-program", type=Path, help="also write the program as JSON (for moesim sim)")
    parser.add_argument("--bare-simpy", action="store_true", help="also time bare SimPy timeouts (context)")
    args = parser.parse_args()
    document = fork_join_program(args.pairs, host_costs=not args.no_host_costs)
    if args.write_program:
        args.write_program.write_text(json.dumps(document))
    program = parse_program(document)
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        result = simulate(program)
        if args.host_spans:
            _ = result.host_spans
        best = min(best, time.perf_counter() - t0)
    kernels = len(result.kernels)
    host = "no host costs" if args.no_host_costs else "host costs on"
    host += ", host spans built" if args.host_spans else ""
    print(f"{kernels} kernels ({host}) simulated in {best:.3f} s (best of {args.repeat}): "
          f"{kernels / best:,.0f} kernels/s; makespan {result.makespan_us:,.1f} µs")
    if args.bare_simpy:
        rate = bare_simpy_rate(repeat=args.repeat)
        print(f"bare SimPy on this machine: {rate:,.0f} timeouts/s (one process yielding env.timeout(1), "
              f"best of {args.repeat})")


if __name__ == "__main__":
    main()
