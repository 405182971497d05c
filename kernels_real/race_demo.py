"""Cross-stream races for the CUDA sanitizer: run under ``TORCH_CUDA_SANITIZER=1``.

``python -m kernels_real.race_demo CASE``; CASE is one of
``multi_stream`` (the event-pair schedule: no race), ``inplace_race`` (main scales the routed input in place
while aux reads it: the seed-000 race), ``lazy_safe`` / ``lazy_unsafe`` (routing issued right after the lazy
switch to a dedicated stream, with and without the seed-003 ``wait_stream``).
Exit code 0 and "no race reported" when the sanitizer stays silent; it raises on a race.
"""

from __future__ import annotations

import sys

import torch

from kernels_real.config import get_preset
from kernels_real.layer import MoELayer, MoEWeights
from kernels_real.streams import current_stream, reset_current_stream

CASES = ("multi_stream", "inplace_race", "lazy_safe", "lazy_unsafe")


def run_case(case: str) -> None:
    """Run one case on the GPU and wait for it."""
    cfg = get_preset("deepseek_v2_lite").scaled_down()
    layer = MoELayer(cfg, "cuda")
    w = MoEWeights.random(cfg, "cuda", seed=3)
    x = torch.randn(32, cfg.hidden, device="cuda", dtype=layer.dtype)  # written on the current stream
    if case == "multi_stream":
        layer(x, w, "multi_stream")
    elif case == "inplace_race":
        layer.unsafe_inplace_demo(x, w)
    else:
        current_stream(safe=case == "lazy_safe")
        try:
            layer(x, w, "sequential")
        finally:
            reset_current_stream()
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    """CLI entry."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in CASES:
        print(f"usage: python -m kernels_real.race_demo {{{','.join(CASES)}}}", file=sys.stderr)
        return 2
    run_case(args[0])
    print("no race reported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
