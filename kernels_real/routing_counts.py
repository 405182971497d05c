"""The experts the bench's layer routes to: per weight set and token count, the rows each expert receives.

``python -m kernels_real.routing_counts --out DIR [--presets ...] [--tokens ...] [--sets 4] [--device cuda]``

The bench (and its probes) time each token count on one input (``bench.bench_input``, seeded by the token
count) through weight sets seeded ``bench.weight_seed(k)``; a graph case runs one layer call per set. The
router is random, so which experts one set hits is a draw: at 16 tokens DeepSeek-V3's biased router hit 86, 73,
69 and 71 of its 256 experts in sets 0-3 on the H200 (call 44), and the grouped GEMMs' time follows.
This script redraws each set's router (the gate and bias only: ``layer.router_weights``, the same generator
calls as ``MoEWeights.random``) and routes the bench's inputs through it exactly as ``MoELayer`` does, so the
simulator can be validated on the routing that was timed instead of its expectation. The draws depend on the
device and torch version (recorded in ``env.json``): a CPU run gives other experts than a CUDA one.

Writes ``DIR/routing.json.gz`` (``{"records": [{"preset", "set", "tokens", "counts"}]}``, ``counts`` the rows
per routed expert, in expert order) and ``DIR/env.json``. Runs on CUDA (HIP-portable calls; ROCm was not run)
and on CPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import torch
import torch.nn.functional as F

from kernels_real.bench import bench_input, run_env, weight_seed
from kernels_real.config import MoEConfig, get_preset, preset_error
from kernels_real.layer import router_weights
from kernels_real.routing import route

TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024)


def expert_counts(cfg: MoEConfig, sets: Iterable[int], tokens: Iterable[int],
                  device: torch.device) -> list[dict[str, object]]:
    """Rows per routed expert for each weight set × token count of ``cfg``, as the bench's layer routes."""
    dtype = getattr(torch, cfg.dtype)
    out: list[dict[str, object]] = []
    for k in sets:
        gate, bias = router_weights(cfg, device, weight_seed(k))
        for t in tokens:
            x = bench_input(cfg, t, device, dtype)
            ids, _ = route(F.linear(x.float(), gate), cfg, bias)
            counts = torch.bincount(ids.flatten(), minlength=cfg.n_experts)
            out.append({"preset": cfg.name, "set": k, "tokens": t, "counts": counts.tolist()})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kernels_real.routing_counts", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for routing.json.gz and env.json")
    p.add_argument("--presets", nargs="+", required=True, help="presets and rank variants (PRESET@tpN / @epN)")
    p.add_argument("--tokens", nargs="+", type=int, default=list(TOKENS), help="token counts (default: %(default)s)")
    p.add_argument("--sets", type=int, default=4, help="weight sets 0 … N-1 (default: 4, the bench's most)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where to draw and route (default: cuda when available)")
    args = p.parse_args(argv)
    bad = preset_error(args.presets) or ("--sets and --tokens must be >= 1"
                                         if args.sets < 1 or min(args.tokens) < 1 else None)
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    records = [r for name in args.presets
               for r in expert_counts(get_preset(name), range(args.sets), args.tokens, device)]
    args.out.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out / "routing.json.gz", "wt") as f:
        json.dump({"records": records}, f, separators=(",", ":"))
    how = "each set's router redrawn (layer.router_weights), the bench's inputs routed as MoELayer routes; no timing"
    (args.out / "env.json").write_text(json.dumps(run_env(device, how), indent=1) + "\n")
    print(f"routing_counts: {len(records)} routings of {len(args.presets)} presets written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
