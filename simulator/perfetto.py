"""Chrome-trace / Perfetto JSON of a simulated run: one track per stream and one for the host, flow arrows
from each record to the waits it satisfied, so a simulated timeline opens in the viewer of real ones."""

from __future__ import annotations

from typing import Any

from simulator.result import SimResult

_PID = 1
_HOST_TID = 0


def to_chrome_trace(result: SimResult, name: str = "moesim") -> dict[str, Any]:
    """Build the trace document (timestamps in µs, as the Chrome trace format expects)."""
    tids = {stream: i + 1 for i, stream in enumerate(result.streams)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": _PID, "tid": 0, "args": {"name": f"{name} (simulated)"}},
        {"ph": "M", "name": "thread_name", "pid": _PID, "tid": _HOST_TID, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_sort_index", "pid": _PID, "tid": _HOST_TID, "args": {"sort_index": 0}},
    ]
    for stream, tid in tids.items():
        events.append({"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid,
                       "args": {"name": f"stream {stream}"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": _PID, "tid": tid,
                       "args": {"sort_index": tid}})
    for span in result.host_spans:
        events.append({"ph": "X", "cat": "host", "name": span.label, "pid": _PID, "tid": _HOST_TID,
                       "ts": span.start_us, "dur": span.end_us - span.start_us})
    for k in result.kernels:
        args: dict[str, Any] = {"op_index": k.index}
        if k.region:
            args["region"] = k.region
        if k.replay is not None:
            args["replay"] = k.replay
        events.append({"ph": "X", "cat": "kernel", "name": k.name, "pid": _PID, "tid": tids[k.stream],
                       "ts": k.start_us, "dur": k.dur_us, "args": args})
    for flow_id, arrow in enumerate(result.flows, start=1):
        label = f"event {arrow.event}"
        src, dst = tids[arrow.src], tids[arrow.dst]
        events.append({"ph": "X", "cat": "event", "name": f"record {arrow.event}", "pid": _PID, "tid": src,
                       "ts": arrow.src_us, "dur": 0})
        events.append({"ph": "X", "cat": "event", "name": f"wait {arrow.event}", "pid": _PID, "tid": dst,
                       "ts": arrow.dst_us, "dur": 0})
        events.append({"ph": "s", "cat": "event", "name": label, "id": flow_id, "pid": _PID, "tid": src,
                       "ts": arrow.src_us, "bp": "e"})
        events.append({"ph": "f", "cat": "event", "name": label, "id": flow_id, "pid": _PID, "tid": dst,
                       "ts": arrow.dst_us, "bp": "e"})
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"generator": "moesim"}}
