"""Collectives' time vs message size and the SMs they hold, one process per GPU.

``torchrun --nproc-per-node N -m kernels_real.distributed.bench_collectives --out DIR`` (one process alone:
a group of one, where the collectives are local copies). Writes ``DIR/collectives.json``
(schema ``moesim.collectives/1``):

- ``times``: for ``all_reduce`` and ``all_to_all`` (``all_to_all_single``, even splits) and each message
  size (bytes held per rank), per-op times of back-to-back calls on the current stream (CUDA events around
  each call, ``async_op=False``; CPU: perf_counter), the slowest rank's statistics and every rank's median;
- ``sm`` (GPU only): the share of the SMs a collective holds, from a probe of known solo time (a chain of
  bf16 square matmuls, compute-bound) run on another stream while the collective repeats back to back:
  ``sm_share = 1 − probe_solo / probe_during`` (an upper bound: HBM contention also slows the probe),
  with ``covered`` saying whether the collectives ran for the whole probe (else the record is not usable).

``python -m calibration.fit_comm`` fits the simulator's link figures to this file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from kernels_real.bench import _nvidia_smi, _write_json
from kernels_real.distributed.parallel import Dist, init, shutdown
from kernels_real.distributed.timing import agreed_max, gather, measure, rank_summary, time_steps
from kernels_real.streams import platform_info

SCHEMA = "moesim.collectives/1"
COLLECTIVES = ("all_reduce", "all_to_all")
DEFAULT_SIZES = tuple(2**i for i in range(10, 29))  # 1 KiB .. 256 MiB per rank
QUICK_SIZES = (2**10, 2**16, 2**20)
SM_SIZES = (2**16, 2**20, 2**24, 2**27)  # 64 KiB .. 128 MiB: decode-sized and bandwidth-bound messages
PROBE_DIM = 4096
PROBE_TARGET_US = 2000.0


def wire_bytes(collective: str, world: int, nbytes: float) -> float:
    """Bytes each rank sends, as the simulator models it (ring all-reduce: 2(n−1)/n·B; even all-to-all:
    (n−1)/n·B)."""
    if collective == "all_reduce":
        return 2.0 * (world - 1) / world * nbytes
    if collective == "all_to_all":
        return (world - 1) / world * nbytes
    raise ValueError(f"unknown collective {collective!r}")


def time_record(collective: str, world: int, nbytes: int, dtype: str, rank_samples: list[list[float]],
                timer: str) -> dict[str, object]:
    """One ``times`` entry from every rank's per-op samples (µs)."""
    return {"collective": collective, "world": world, "bytes": nbytes, "dtype": dtype,
            "wire_bytes": wire_bytes(collective, world, nbytes), **rank_summary(rank_samples), "timer": timer}


def sm_record(collective: str, world: int, nbytes: int, probe_solo_us: list[float], probe_during_us: list[float],
              covered: list[bool], collectives_per_probe: int, probe: dict[str, object]) -> dict[str, object]:
    """One ``sm`` entry from every rank's probe times (median per rank; the record uses the slowest rank's
    slowdown and is ``covered`` only if every rank's collectives outlasted its probe)."""
    shares = [1.0 - s / c for s, c in zip(probe_solo_us, probe_during_us, strict=True)]
    worst = max(range(len(shares)), key=lambda i: shares[i])
    return {"collective": collective, "world": world, "bytes": nbytes, "probe": probe,
            "probe_solo_us": probe_solo_us[worst], "probe_during_us": probe_during_us[worst],
            "sm_share": max(0.0, shares[worst]), "rank_sm_shares": shares, "covered": all(covered),
            "collectives_per_probe": collectives_per_probe}


class Collective:
    """Pre-allocated buffers and one call of a collective of ``nbytes`` per rank."""

    def __init__(self, name: str, nbytes: int, d: Dist, dtype: torch.dtype) -> None:
        elem = torch.empty((), dtype=dtype).element_size()
        n = max(d.world, nbytes // elem // d.world * d.world)  # all_to_all splits evenly
        gen = torch.Generator().manual_seed(d.rank)
        self.name, self.nbytes = name, n * elem
        self.src = torch.randn(n, generator=gen).to(device=d.device, dtype=dtype)
        self.dst = self.src.clone()

    def __call__(self, i: int = 0) -> None:
        if self.name == "all_reduce":
            dist.all_reduce(self.dst)  # in place: the values grow (to inf in bf16); the time does not depend on them
        else:
            dist.all_to_all_single(self.dst, self.src)


def _probe(d: Dist, chain: int) -> tuple[torch.Tensor, ...]:
    a = torch.randn(PROBE_DIM, PROBE_DIM, device=d.device, dtype=torch.bfloat16)
    return (a, *[torch.randn_like(a) * PROBE_DIM**-0.5 for _ in range(chain)])


def _run_probe(t: tuple[torch.Tensor, ...]) -> torch.Tensor:
    y = t[0]
    for b in t[1:]:
        y = y @ b
    return y


def sm_share(d: Dist, coll: Collective, op_us: float) -> tuple[float, float, bool, int, dict[str, object]]:
    """This rank's probe solo and during-collective medians (µs), whether covered, collectives per probe."""
    t1 = _probe(d, 1)
    one = statistics.median(time_steps(lambda i: _run_probe(t1), 5, True))
    chain = max(1, round(PROBE_TARGET_US / max(one, 1.0)))
    t = _probe(d, chain)
    solo = statistics.median(time_steps(lambda i: _run_probe(t), 5, True))
    reps = math.ceil(2.0 * solo / max(op_us, 1.0)) + 2
    reps = int(agreed_max(d, reps))  # every rank issues the same collectives
    comm = torch.cuda.Stream(d.device)
    during, covered = [], []
    for _ in range(5):
        dist.barrier()
        first, comm_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        p0, p1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        main = torch.cuda.current_stream(d.device)
        comm.wait_stream(main)
        with torch.cuda.stream(comm):
            coll()
            first.record(comm)
            for _ in range(reps - 1):
                coll()
            comm_end.record(comm)
        main.wait_event(first)
        p0.record(main)
        _run_probe(t)
        p1.record(main)
        main.wait_stream(comm)
        torch.cuda.synchronize()
        during.append(p0.elapsed_time(p1) * 1e3)
        covered.append(first.elapsed_time(comm_end) >= first.elapsed_time(p1))
    probe = {"op": "bf16 matmul chain", "dim": PROBE_DIM, "chain": chain}
    return solo, statistics.median(during), all(covered), reps, probe


def run(args: argparse.Namespace) -> int:
    d = init(args.device)
    gpu = d.on_gpu
    dtype = torch.bfloat16 if gpu else torch.float32
    timer = "cuda_events" if gpu else "perf_counter"
    times: list[dict[str, object]] = []
    sms: list[dict[str, object]] = []
    target = 0.01 if args.quick else 0.05
    try:
        for name in COLLECTIVES:
            for nbytes in args.sizes:
                coll = Collective(name, nbytes, d, dtype)
                samples = measure(d, coll, target, 5 if args.quick else 10, 50 if args.quick else 300)
                ranks = gather(d, samples)
                if ranks is not None:
                    times.append(time_record(name, d.world, coll.nbytes, str(dtype).removeprefix("torch."),
                                             ranks, timer))
                if gpu and not args.no_sm and nbytes in SM_SIZES:
                    op_us = agreed_max(d, statistics.median(samples))
                    solo, during, covered, reps, probe = sm_share(d, coll, op_us)
                    per_rank = gather(d, (solo, during, covered))
                    if per_rank is not None:
                        s, c, cov = (list(v) for v in zip(*per_rank, strict=True))
                        sms.append(sm_record(name, d.world, coll.nbytes, s, c, cov, reps, probe))
                del coll
            if d.rank == 0:
                print(f"[bench_collectives] {name}: {len(args.sizes)} sizes on {d.world} rank(s)", file=sys.stderr,
                      flush=True)
    finally:
        shutdown()
    if d.rank == 0:
        env = {"date": dt.datetime.now().isoformat(timespec="seconds"), "argv": sys.argv[1:],
               **platform_info(d.device if gpu else None), "world": d.world, "comm_backend": d.backend,
               "nccl_version": ".".join(map(str, torch.cuda.nccl.version())) if gpu else None,
               "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
               "nvidia_smi": _nvidia_smi() if gpu and not torch.version.hip else None}
        how = {"times": "per-op CUDA events (CPU: perf_counter) around back-to-back calls, async_op=False, "
                        "after 3 warm-ups and a barrier; every rank runs the same count; slowest rank's stats",
               "sm": "probe (bf16 matmul chain, solo ~2 ms) on the main stream started after the first of "
                     "`collectives_per_probe` back-to-back collectives on a side stream; median of 5; "
                     "sm_share = 1 - solo/during (upper bound: HBM contention counts too)"}
        args.out.mkdir(parents=True, exist_ok=True)
        _write_json(args.out / "collectives.json",
                    {"schema": SCHEMA, "env": env, "how": how, "times": times, "sm": sms})
        for r in times:
            print(f"{r['collective']:>10} {r['bytes']:>11} B  {r['median_us']:9.1f} us  "
                  f"({r['world']} ranks, {r['timer']}, slowest rank's median)")
        for r in sms:
            print(f"{r['collective']:>10} {r['bytes']:>11} B  SM share {r['sm_share']:.3f}  covered={r['covered']}")
    return 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="torchrun --nproc-per-node N -m kernels_real.distributed.bench_collectives",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="output directory (rank 0 writes collectives.json)")
    p.add_argument("--sizes", nargs="+", type=int, help="bytes per rank (default 2^10 .. 2^28; --quick: 3 sizes)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda if visible (NCCL), else cpu (gloo)")
    p.add_argument("--quick", action="store_true", help="three sizes, short timing")
    p.add_argument("--no-sm", action="store_true", help="skip the SM-share probe")
    args = p.parse_args(argv)
    args.sizes = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    return args


def main(argv: list[str] | None = None) -> int:
    """CLI entry: bad input gives one line on stderr and exit code 2."""
    args = _parse(argv)
    if any(s < 1 for s in args.sizes):
        print("error: message sizes must be >= 1 byte", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA/ROCm device visible to torch; use --device cpu", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
