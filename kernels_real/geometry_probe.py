"""Which kernel the BLAS library launches for each GEMM of a dual-stream layer, and its launch geometry.

For each preset (and rank variant) × token count, the layer's dense GEMMs in the layer's own call form, inside
one CUDA graph replay: on an aux stream forked from the main stream, the shared experts' ``F.linear(x,
shared_w13)`` then ``F.linear(silu_and_mul(.), shared_w2)`` (bf16); on the main stream the router's
``F.linear(x.float(), gate)`` (fp32). One replay under the profiler; per GEMM the traced kernel's name, grid,
block, registers per thread and shared memory per block (the occupancy inputs). Kernel-level facts of this GPU
and BLAS build only: no time is kept, no layer-level outcome is measured. Only ``torch.cuda`` APIs (HIP builds
provide them); not run on AMD hardware.

    python -m kernels_real.geometry_probe --out DIR [--presets ...] [--tokens 1 2 4 8 16 32 64]
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import platform
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from kernels_real.config import get_preset
from kernels_real.layer import silu_and_mul
from kernels_real.profiling import chrome_trace
from simulator.workloads.presets import PRESETS as PRESET_DIMS

PRESETS = tuple(PRESET_DIMS)
RANKS = ("", "@tp2", "@tp4", "@tp8", "@ep2", "@ep4", "@ep8")
TOKENS = (1, 2, 4, 8, 16, 32, 64)
FIELDS = ("grid", "block", "registers per thread", "shared memory")
_SKIP = ("elementwise", "silu", "mul", "copy", "fill", "reduce_1block")  # non-GEMM kernels of the step


def is_gemm_kernel(name: str) -> bool:
    """A GEMM / GEMV kernel of the step (not its activation, casts, or split-K reduction)."""
    low = name.lower()
    return not any(tag in low for tag in _SKIP) and "splitkreduce" not in low


def _step(name: str, tokens: int, device: torch.device) -> Any:
    """The step the graph captures: the shared experts forked onto an aux stream, the router on the main one."""
    cfg = get_preset(name)
    dtype = getattr(torch, cfg.dtype)
    h, s = cfg.hidden, cfg.shared_total
    x = torch.randn(tokens, h, device=device, dtype=dtype)
    gate = torch.randn(cfg.n_experts, h, device=device, dtype=torch.float32)
    w13 = torch.randn(2 * s, h, device=device, dtype=dtype).mul_(h**-0.5) if s else None
    w2 = torch.randn(h, s, device=device, dtype=dtype).mul_(s**-0.5) if s else None
    shared_gate = torch.randn(1, h, device=device, dtype=dtype) if s and cfg.shared_gate else None
    aux = torch.cuda.Stream(device)

    def step() -> None:
        aux.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(aux):
            if w13 is not None:
                y = F.linear(silu_and_mul(F.linear(x, w13)), w2)
                if shared_gate is not None:
                    y = y * torch.sigmoid(F.linear(x, shared_gate))
        F.linear(x.float(), gate)
        torch.cuda.current_stream(device).wait_stream(aux)

    return step


def probe_point(name: str, tokens: int, device: torch.device) -> dict[str, Any]:
    """The GEMM kernels of one point, per stream in launch order (the aux stream: the shared experts' GEMMs, none
    for a model without shared experts; the main stream: the router's)."""
    step = _step(name, tokens, device)
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
    gemms = [e for e in kernels if is_gemm_kernel(e["name"])]

    def fact(e: dict[str, Any]) -> dict[str, Any]:
        args = e.get("args", {})
        return {"kernel": e["name"], **{f: args.get(f) for f in FIELDS}, "stream": args.get("stream")}

    streams: dict[Any, list[dict[str, Any]]] = {}
    for e in gemms:
        streams.setdefault(e.get("args", {}).get("stream"), []).append(fact(e))
    return {"preset": name, "tokens": tokens, "streams": list(streams.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="folder for geometry.json.gz")
    ap.add_argument("--presets", nargs="+", default=[p + r for p in PRESETS for r in RANKS],
                    help="presets / rank variants (default: every preset × plain, tp2/4/8, ep2/4/8)")
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS), help="token counts (default 1..64)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("geometry_probe: no GPU (CUDA / HIP) visible", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    records = []
    for name in args.presets:
        for tokens in args.tokens:
            records.append(probe_point(name, tokens, device))
            torch.cuda.empty_cache()
        print(f"{name}: {len(args.tokens)} token counts", flush=True)
    props = torch.cuda.get_device_properties(device)
    env = {"date": datetime.date.today().isoformat(), "gpu": props.name, "sm_count": props.multi_processor_count,
           "torch": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
           "python": platform.python_version(), "how": __doc__.split("\n\n")[1].replace("\n", " ")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "geometry.json.gz").write_bytes(gzip.compress(json.dumps({"env": env, "records": records}).encode()))
    print(f"wrote {args.out / 'geometry.json.gz'}: {len(records)} points")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
