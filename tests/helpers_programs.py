"""Small builders shared by the engine tests: write programs tersely."""

from __future__ import annotations

from typing import Any

from simulator.ir import Program, parse_program


def launch(kernel: str, stream: str, dur: float, **extra: Any) -> dict:
    return {"launch": {"kernel": kernel, "stream": stream, "dur_us": dur, **extra}}


def record(event: str, stream: str) -> dict:
    return {"record": {"event": event, "stream": stream}}


def wait(stream: str, event: str) -> dict:
    return {"wait": {"stream": stream, "event": event}}


def program(ops: list[dict], streams: dict[str, str] | None = None, **host: float) -> Program:
    streams = streams or {"main": "nonblocking", "aux": "nonblocking"}
    return parse_program({"streams": {k: {"kind": v} for k, v in streams.items()}, "host": host, "ops": ops})


def times(result) -> dict[str, tuple[float, float]]:
    """Kernel name -> (start, end); names are unique in these tests."""
    return {k.name: (k.start_us, k.end_us) for k in result.kernels}
