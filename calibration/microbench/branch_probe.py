"""When does the routing branch start beside a shared GEMM inside a replayed graph, and when does it end?

The placement probe's profiled replays (``placement_probe.py``) time each kernel from its own start; in its
``S|R`` graphs the routing chain on the other stream often started late, even beside GEMMs that leave SMs free.
Whether that is the graph's branch dispatch, SM room, or the profiler, its traces cannot say. This probe asks the
GPU's global timer instead, with no profiler: one-warp stamp kernels (Triton, ``%globaltimer``, ns) write the time
into a buffer at four points of each weight set's step, per graph:

- ``S``: fork stamp, the shared GEMM (``F.linear`` of [M, K] bf16 by one of the rotating [N, K] weights), S end;
- ``R``: fork stamp, R start, the routing head (``x.float()`` then the fp32 router GEMM), R end;
- ``S|R``: the fork stamp on main, then, forked with an event pair as the layer does, the aux branch (S, S end)
  captured first and the main branch (R start, routing head, R end), joined before the next set.

A stamp kernel is one block of one warp with few registers and no shared memory: "R start" is when the branch
gets an SM for it (at once wherever S leaves SMs free; beside a GEMM whose blocks hold every SM's registers it
waited), and "R end" minus it is the routing head's time beside S (its cast and GEMM). The stamps are not
neutral: in call 37 a stamp ahead of the routing head halved some forked graphs against the same graph without
stamps (``events_us``). Shapes: ``placement_probe.SHARED`` ×
the routers of ``--routers`` × ``--tokens``. 3 warm-up and 25 replays per graph, every replay's stamps read
back; medians over replays × sets, µs after the set's fork stamp. Then, in the same process, the placement probe's
own S, R and S|R graphs of the case without stamps, event-timed (``events_us``, µs per set): whether a stamp
kernel changes the co-run.
``python -m calibration.microbench.branch_probe --out DIR`` writes ``branch_probe.json.gz``.
CUDA only (``%globaltimer`` is PTX; not run on AMD hardware, refused on ROCm).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from calibration.microbench.graph_corun import capture, replay_us
from calibration.microbench.placement_probe import ROUTERS, SETS, SHARED, routing_op, steps
from kernels_real.bench import run_env

STAMPS = ("fork", "S end", "R start", "R end")
WARM, REPS = 3, 25
DEFAULT_ROUTERS = ("deepseek_v3", "llama4_maverick", "kimi_k2")


def stamp_kernel() -> Callable[[torch.Tensor, int], None]:
    """``stamp(buf, slot)``: one warp writes the global timer (ns) into ``buf[slot]``."""
    import triton
    import triton.language as tl

    @triton.jit
    def _stamp(out_ptr, slot):
        tl.store(out_ptr + slot, tl.extra.cuda.globaltimer())

    def stamp(buf: torch.Tensor, slot: int) -> None:
        _stamp[(1,)](buf, slot, num_warps=1)
    return stamp


def stamped_steps(k: int, n: int, hidden: int, experts: int, m: int, aux: torch.cuda.Stream, buf: torch.Tensor,
                  stamp: Callable[[torch.Tensor, int], None]) -> dict[str, Callable[[int], None]]:
    """The three stamped steps of one (shared shape, router, token count); set ``i`` writes ``buf[i, :]``."""
    gen = torch.Generator(device="cuda").manual_seed(m)
    xs = torch.randn(m, k, generator=gen, device="cuda", dtype=torch.bfloat16)
    shared = [torch.randn(n, k, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    route = routing_op("router", hidden, experts, m, gen, torch.float32)
    slot = {name: i for i, name in enumerate(STAMPS)}

    def at(i: int, name: str) -> None:
        stamp(buf, i * len(STAMPS) + slot[name])

    def s_alone(i: int) -> None:
        at(i, "fork")
        F.linear(xs, shared[i])
        at(i, "S end")

    def r_alone(i: int) -> None:
        at(i, "fork")
        at(i, "R start")
        route(i)
        at(i, "R end")

    def forked(i: int) -> None:
        main = torch.cuda.current_stream()
        at(i, "fork")
        ready, done = torch.cuda.Event(), torch.cuda.Event()
        ready.record(main)
        with torch.cuda.stream(aux):
            aux.wait_event(ready)
            F.linear(xs, shared[i])
            at(i, "S end")
            done.record(aux)
        at(i, "R start")
        route(i)
        at(i, "R end")
        main.wait_event(done)

    return {"S": s_alone, "R": r_alone, "S|R": forked}


def stamped_replays(graph: torch.cuda.CUDAGraph, buf: torch.Tensor) -> dict[str, float]:
    """Median µs after each set's fork stamp of every other stamp the graph writes, over replays × sets."""
    for _ in range(WARM):
        graph.replay()
    samples: dict[str, list[float]] = {}
    for _ in range(REPS):
        buf.fill_(-1)
        graph.replay()
        torch.cuda.synchronize()
        for row in buf.view(SETS, len(STAMPS)).tolist():
            for name, t in zip(STAMPS[1:], row[1:], strict=True):
                if t >= 0:
                    samples.setdefault(name, []).append((t - row[0]) / 1e3)
    return {name: round(statistics.median(v), 3) for name, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.microbench.branch_probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--budget-s", type=float, default=120.0, help="skip the remaining cases after this many s")
    p.add_argument("--tokens", type=int, nargs="+", default=[2], metavar="M", help="token counts (default 2)")
    p.add_argument("--routers", nargs="+", choices=[r[0] for r in ROUTERS], default=list(DEFAULT_ROUTERS),
                   metavar="PRESET",
                   help=f"size the routing head as these presets (default {' '.join(DEFAULT_ROUTERS)})")
    args = p.parse_args(argv)
    if min(args.tokens) < 1:
        p.error("--tokens: token counts are >= 1")
    if not torch.cuda.is_available() or torch.version.hip is not None:
        print("error: needs a CUDA GPU (the stamps read PTX's %globaltimer; not available on ROCm)", file=sys.stderr)
        return 2
    stamp, aux = stamp_kernel(), torch.cuda.Stream()
    buf = torch.full((SETS * len(STAMPS),), -1, dtype=torch.int64, device="cuda")
    records, skipped, begun = [], [], time.monotonic()
    for s_label, k, n in SHARED:
        for r_label, hidden, experts in ROUTERS:
            if r_label not in args.routers:
                continue
            for m in args.tokens:
                case = {"shared": s_label, "K": k, "N": n, "router": r_label, "hidden": hidden,
                        "experts": experts, "tokens": m}
                if time.monotonic() - begun > args.budget_s:
                    skipped.append(case)
                    continue
                made = stamped_steps(k, n, hidden, experts, m, aux, buf, stamp)
                stamps = {name: stamped_replays(capture(step, SETS), buf) for name, step in made.items()}
                # the placement probe's graphs again, without stamps, event-timed (µs per set), in the same process
                plain = {name: round(statistics.median(replay_us(capture(step, SETS), SETS)), 3)
                         for name, step in steps(k, n, hidden, experts, m, aux).items()}
                records.append({**case, "stamps_us": stamps, "events_us": plain})
                both = stamps["S|R"]
                print(f"{s_label:22} {r_label:16} t{m}  S end {stamps['S']['S end']:6.1f}  R alone "
                      f"{stamps['R']['R end'] - stamps['R']['R start']:5.1f}  | S|R: R start {both['R start']:5.1f}"
                      f"  R end {both['R end']:6.1f}  S end {both['S end']:6.1f}  | no stamps: S|R {plain['S|R']:6.1f}",
                      flush=True)
                torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"env": run_env(torch.device("cuda"), __doc__), "stamps": list(STAMPS), "records": records,
               "skipped": skipped}
    (args.out / "branch_probe.json.gz").write_bytes(gzip.compress(json.dumps(payload).encode()))
    print(f"[branch_probe] {len(records)} cases, {len(skipped)} skipped, {time.monotonic() - begun:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
