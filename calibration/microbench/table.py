"""The short human summary printed at the end of a run (pure: reads the document dict)."""

from __future__ import annotations

from typing import Any


def _f(v: Any, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _side(s: dict[str, Any]) -> str:
    sh = s["shape"]
    return str(sh.get("tag") or sh["op"]) + (f"@M={sh['M']}" if "M" in sh and sh["op"] == "mm" else "")


def summary(doc: dict[str, Any], path: str, max_pairs: int = 8) -> str:
    env, ceil, host = doc["env"], doc["ceilings"], doc["host"]
    src = f"measured here ({env['gpu']}, {env['date']}; {path})"
    lines = [f"microbench: {len(doc['solo'])} solo shapes, {len(doc['corun'])} co-run pairs — all figures "
             f"{src}",
             f"ceilings: copy {_f(ceil.get('copy_GBps'), '.0f')} GB/s (read+write), "
             f"bf16 matmul {_f(ceil.get('bf16_tflops'), '.0f')} TFLOP/s"]
    if host:
        lines.append("host (µs): " + ", ".join(
            f"{k.removesuffix('_us')} {_f(host.get(k))}" for k in
            ("launch_us", "record_us", "wait_us", "set_stream_us", "stream_ctx_us", "fork_join_us", "sync_us",
             "replay_us", "kernel_gap_us", "node_gap_us")) + f", queue depth {host.get('queue_depth')}")
    if doc["corun"]:
        lines.append(f"{'co-run pair':<58} {'a µs':>8} {'b µs':>8} {'seq':>8} {'both':>8} {'gain':>6} "
                     f"{'slow a':>6} {'slow b':>6}")
    for c in doc["corun"][:max_pairs]:
        name = f"{_side(c['a'])} x {_side(c['b'])}"[:58]
        lines.append(f"{name:<58} {c['a']['solo_us']:>8.1f} {c['b']['solo_us']:>8.1f} {c['sequential_us']:>8.1f} "
                     f"{c['together_us']:>8.1f} {_f(c['overlap_gain'], '.1%'):>6} {_f(c['slowdown_a']):>6} "
                     f"{_f(c['slowdown_b']):>6}")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)
