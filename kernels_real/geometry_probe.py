"""Which kernel the BLAS library launches for each GEMM of a dual-stream layer, and its launch geometry.

For each preset (and rank variant) × token count, the layer's GEMMs in the layer's own call form, inside one CUDA
graph replay: on an aux stream forked from the main stream, the shared experts' ``F.linear(x, shared_w13)`` then
``F.linear(silu_and_mul(.), shared_w2)`` (bf16, and the shared gate's GEMM where the model has one); on the main
stream the router's ``F.linear(x.float(), gate)`` (fp32), then the routed experts' two grouped GEMMs over the
``tokens × top_k`` routed rows (``kernels_real.grouped_gemm.grouped_mm``, the layer's backend and expert layout;
rows sorted by a random expert draw, the group offsets on the device as in the layer). One replay under the
profiler; per kernel, per stream in launch order, its name, grid, block, registers per thread and shared memory
per block (the occupancy inputs). Kernel-level facts of this GPU and BLAS build only: no time is kept, no
layer-level outcome is measured, and the routed experts' weights are left uninitialised (the library picks its
kernel by the shapes, never by the values; nothing is timed). Only ``torch.cuda`` APIs (HIP builds provide them);
not run on AMD hardware.

    python -m kernels_real.geometry_probe --out DIR [--presets ...] [--tokens 1 2 4 ... 256]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kernels_real.config import MoEConfig, get_preset
from kernels_real.grouped_gemm import grouped_mm, make_groups, select_backend
from kernels_real.layer import silu_and_mul
from kernels_real.profiling import chrome_trace
from simulator.workloads.presets import PRESETS as PRESET_DIMS

RANKS = ("", "@tp2", "@tp4", "@tp8", "@ep2", "@ep4", "@ep8")
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
FIELDS = ("grid", "block", "registers per thread", "shared memory")


def default_points() -> list[str]:
    """Every preset with each rank variant its dimensions divide (e.g. 60 experts: no EP 8)."""
    points = []
    for base in PRESET_DIMS:
        for rank in RANKS:
            try:
                get_preset(base + rank)
            except ValueError:
                continue
            points.append(base + rank)
    return points


@dataclass(frozen=True)
class Weights:
    """One preset's GEMM operands: the router's (fp32), the shared experts' and the routed experts' (one layout)."""

    cfg: MoEConfig
    gate: torch.Tensor
    shared: tuple[torch.Tensor, ...]  # w13, w2 and the shared gate where the model has one; empty without them
    w13: torch.Tensor  # [E, 2I, H]
    w2: torch.Tensor  # [E, H, I]

    @classmethod
    def of(cls, name: str, device: torch.device) -> Weights:
        cfg = get_preset(name)
        dtype = getattr(torch, cfg.dtype)
        h, s, i, e = cfg.hidden, cfg.shared_total, cfg.moe_intermediate, cfg.n_experts
        shared: tuple[torch.Tensor, ...] = ()
        if s:
            shared = (torch.randn(2 * s, h, device=device, dtype=dtype).mul_(h**-0.5),
                      torch.randn(h, s, device=device, dtype=dtype).mul_(s**-0.5))
            if cfg.shared_gate:
                shared += (torch.randn(1, h, device=device, dtype=dtype).mul_(h**-0.5),)
        gate = torch.randn(e, h, device=device, dtype=torch.float32).mul_(h**-0.5)
        return cls(cfg, gate, shared, torch.empty(e, 2 * i, h, device=device, dtype=dtype),
                   torch.empty(e, h, i, device=device, dtype=dtype))


def _step(w: Weights, tokens: int, device: torch.device) -> Callable[[], None]:
    """The step the graph captures: the shared experts forked onto an aux stream; the router and the grouped GEMMs
    on the main one."""
    cfg = w.cfg
    dtype = getattr(torch, cfg.dtype)
    x = torch.randn(tokens, cfg.hidden, device=device, dtype=dtype)
    gen = torch.Generator(device=device).manual_seed(tokens)
    ids = torch.randint(0, cfg.n_experts, (tokens * cfg.top_k,), device=device, generator=gen)
    order, groups = make_groups(ids, cfg.n_experts, capacity=tokens)
    rows = x.index_select(0, order // cfg.top_k)
    backend = select_backend(device, dtype)
    aux = torch.cuda.Stream(device)

    def step() -> None:
        aux.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(aux):
            if w.shared:
                y = F.linear(silu_and_mul(F.linear(x, w.shared[0])), w.shared[1])
                if len(w.shared) == 3:
                    y = y * torch.sigmoid(F.linear(x, w.shared[2]))
        F.linear(x.float(), w.gate)
        grouped_mm(silu_and_mul(grouped_mm(rows, w.w13, groups, backend)), w.w2, groups, backend)
        torch.cuda.current_stream(device).wait_stream(aux)

    return step


def probe_point(w: Weights, tokens: int, device: torch.device) -> dict[str, Any]:
    """Every kernel of one point's replayed graph, per stream in launch order."""
    step = _step(w, tokens, device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm up (cuBLAS handles, workspaces) off the capture
        step()
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    graph.replay()
    trace = json.loads(chrome_trace(graph.replay, gpu=True))
    kernels = sorted((e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    streams: dict[Any, list[dict[str, Any]]] = {}
    for e in kernels:
        args = e.get("args", {})
        streams.setdefault(args.get("stream"), []).append({"name": e["name"], **{f: args.get(f) for f in FIELDS}})
    return {"preset": w.cfg.name, "tokens": tokens, "streams": list(streams.values())}


def _write(out: Path, records: list[dict[str, Any]], device: torch.device) -> None:
    props = torch.cuda.get_device_properties(device)
    env = {"date": datetime.date.today().isoformat(), "gpu": props.name, "sm_count": props.multi_processor_count,
           "torch": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
           "python": platform.python_version(), "how": " ".join(__doc__.split("\n\n")[1].split())}
    out.mkdir(parents=True, exist_ok=True)
    (out / "geometry.json.gz").write_bytes(gzip.compress(json.dumps({"env": env, "records": records}).encode()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for geometry.json.gz (rewritten after each preset)")
    ap.add_argument("--presets", nargs="+", default=None,
                    help="presets / rank variants (default: every preset × plain, tp2/4/8, ep2/4/8 it divides)")
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS), help="token counts (default 1..256)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("geometry_probe: no GPU (CUDA / HIP) visible", file=sys.stderr)
        return 2
    try:
        points = args.presets or default_points()
        for name in points:
            get_preset(name)
    except ValueError as err:
        print(f"geometry_probe: {err}", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    records: list[dict[str, Any]] = []
    for n, name in enumerate(points, 1):
        weights = Weights.of(name, device)
        records.extend(probe_point(weights, tokens, device) for tokens in args.tokens)
        del weights
        torch.cuda.empty_cache()
        _write(args.out, records, device)
        print(f"[{n}/{len(points)}] {name}: {len(args.tokens)} token counts", flush=True)
    print(f"wrote {args.out / 'geometry.json.gz'}: {len(records)} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
