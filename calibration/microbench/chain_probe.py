"""Does a chain of tiny kernels slow down beside a wide GEMV inside a CUDA graph, and how does it grow with the
chain's length? (The graph co-runs show DeepSeek-V3's ~30-kernel routing chain losing beside the shared GEMVs
where Qwen2's ~15-kernel chain overlaps well.)

Per chain length N and token count M: ``G`` = DeepSeek-V3's shared gate_up GEMM ([M, 7168] × [7168, 4096] bf16,
cuBLAS: one full-SM block per tile) over rotating weight sets, ``C`` = N dependent one-block kernels
(``add_`` on 1024 floats), ``G|C`` / ``C|G`` = both forked from main with an event pair (the branch named first
captured first), each graph over the same rotating sets; CUDA-event timed replays, medians per set
(``graph_corun.capture`` / ``replay_us``). ``python -m calibration.microbench.chain_probe --out DIR`` writes
``chain_probe.json``. torch.cuda API only (not run on AMD hardware).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from calibration.microbench.graph_corun import capture, forked, replay_us
from kernels_real.bench import run_env

CHAINS = (1, 4, 16, 32)
TOKENS = (1, 2, 16)
SETS = 6  # 6 × 58.7 MB of weights: several L2s between two uses of a set


def steps(m: int, n: int, aux: torch.cuda.Stream) -> dict[str, Callable[[int], None]]:
    """The four steps at ``m`` tokens and a chain of ``n`` kernels."""
    gen = torch.Generator(device="cuda").manual_seed(m)
    x = torch.randn(m, 7168, generator=gen, device="cuda", dtype=torch.bfloat16)
    weights = [torch.randn(4096, 7168, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(SETS)]
    tiny = torch.zeros(1024, device="cuda")

    def gemm(k: int) -> None:
        F.linear(x, weights[k])

    def chain(k: int) -> None:
        for _ in range(n):
            tiny.add_(1.0)

    return {"G": gemm, "C": chain, "G|C": forked(aux, gemm, chain, aux_first=True),
            "C|G": forked(aux, gemm, chain, aux_first=False)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.microbench.chain_probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA/ROCm GPU", file=sys.stderr)
        return 2
    aux = torch.cuda.Stream()
    records = []
    for m in TOKENS:
        for n in CHAINS:
            graphs = {name: capture(step, SETS) for name, step in steps(m, n, aux).items()}
            med = {name: statistics.median(replay_us(g, SETS)) for name, g in graphs.items()}
            records.append({"tokens": m, "chain": n, "median_us": med})
            solo = med["G"] + med["C"]
            print(f"t{m:<3} N{n:<3} G {med['G']:6.1f} C {med['C']:6.1f} G|C {med['G|C']:6.1f} "
                  f"C|G {med['C|G']:6.1f} overlap {100 * (1 - med['G|C'] / solo):+5.1f}%", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    env = run_env(torch.device("cuda"), __doc__)
    (args.out / "chain_probe.json").write_text(json.dumps({"env": env, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
