"""Session 30 check (kept as evidence beside its output, not a tool): is the microbench's 1-expert grouped GEMM
slower than the layer's because of its operands' values or because of its timing method?

Llama-4-Scout's gate_up grouped GEMM at 1 token, the layer's own call (kernels_real.grouped_probe.routed_call),
timed as the microbench times a solo shape ((T(2n) - T(n)) / n over event-timed replays of n- and 2n-call graphs,
calibration.microbench.timing / stats), with the layer's rows and weights, and with either or both replaced by
torch.randn values of the same shape (the microbench's operands); then the layer's rows copied into new allocations,
and the layer's call again (order drift); then the layer's rows copied to 16 more places. Writes
OUT/rotation_check.json.
Usage (repo root, GPU): PYTHONPATH=. python3 <this file> OUT
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch

from calibration.microbench.stats import chain_per_call
from calibration.microbench.timing import capture, replay_times
from kernels_real.bench import run_env
from kernels_real.grouped_probe import routed_call

out = Path(sys.argv[1])
dev = torch.device("cuda")
res = {}
for tokens in (1, 2):
    c = routed_call("llama4_scout", tokens, dev)
    offs = c.groups.offsets
    w_layer, w_randn = c.w13.transpose(1, 2), torch.randn_like(c.w13).transpose(1, 2)
    x_layer, x_randn = c.rows, torch.randn_like(c.rows)
    x_clone = x_layer.clone()  # the layer's values in a new allocation
    x_copied = torch.randn_like(c.rows).copy_(x_layer)  # the same, allocated as randn_x is
    for name, (x, w) in {"layer": (x_layer, w_layer), "randn_w": (x_layer, w_randn),
                         "randn_x": (x_randn, w_layer), "randn_both": (x_randn, w_randn),
                         "layer_clone": (x_clone, w_layer), "layer_copied": (x_copied, w_layer),
                         "layer_again": (x_layer, w_layer)}.items():
        def f(x=x, w=w, offs=offs):
            return torch._grouped_mm(x, w, offs=offs)
        f()
        torch.cuda.synchronize()
        n = 12
        short, long = capture(torch, [f] * n), capture(torch, [f] * (2 * n))
        replay_times(torch, [short, long], 2)
        ts, tl = replay_times(torch, [short, long], 9)
        res[f"t{tokens} {name}"] = float(np.median(chain_per_call(ts, tl, n)))
        print(f"t{tokens} {name:10s} {res[f't{tokens} {name}']:.1f} us per call", flush=True)
        del short, long
    spread = []  # the layer's rows copied to 16 more places (a spacer allocation of varying size before each)
    keep = []
    for i in range(16):
        keep.append(torch.empty(4096 * (2 * i + 1), dtype=torch.uint8, device=dev))
        xi = torch.empty_like(x_layer).copy_(x_layer)
        keep.append(xi)

        def g(x=xi, w=w_layer, offs=offs):
            return torch._grouped_mm(x, w, offs=offs)
        g()
        torch.cuda.synchronize()
        short, long = capture(torch, [g] * 12), capture(torch, [g] * 24)
        replay_times(torch, [short, long], 2)
        ts, tl = replay_times(torch, [short, long], 9)
        spread.append({"address": xi.data_ptr(), "per_call_us": float(np.median(chain_per_call(ts, tl, 12)))})
        del short, long
    res[f"t{tokens} placements"] = spread
    us = [r["per_call_us"] for r in spread]
    print(f"t{tokens} 16 placements: min {min(us):.1f} median {np.median(us):.1f} mean {np.mean(us):.1f} "
          f"max {max(us):.1f}", flush=True)
    del c, w_randn, x_randn, x_clone, x_copied, keep
    torch.cuda.empty_cache()
out.mkdir(parents=True, exist_ok=True)
(out / "rotation_check.json").write_text(json.dumps(
    {"env": run_env(dev, "microbench chain timing of the layer's Scout gate_up call, layer vs randn operands"),
     "per_call_us": res}, indent=1) + "\n")
