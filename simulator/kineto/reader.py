"""Streaming reader of Kineto / Chrome-trace JSON (plain or gzipped) into compact :class:`Trace` records.

The file is fed in chunks to ijson's push parsers, so memory grows with the events kept (a few small
tuples per GPU op, API call, range and operator), never with the file: python stacks, memory events and
unknown categories are dropped as they stream past. A tqdm bar on stderr counts the bytes read.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import ijson
from tqdm import tqdm

from simulator.errors import InputError
from simulator.kineto.events import CpuOp, DeviceProps, Flow, GpuOp, HostCall, Range, SyncOp, Trace

CHUNK = 1 << 16

_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
             "memset": "memset", "concurrent kernel": "kernel"}
_API_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver"}
_OP_CATS = {"cpu_op", "operator"}
_IGNORED = {"python_function", "gpu_user_annotation", "cpu_instant_event", "trace", "overhead",
            "python", "fwdbwd"}


def read_trace(path: str | Path, *, progress: bool = True) -> Trace:
    """Read ``path`` into a :class:`Trace`; a missing, unreadable or malformed file is one ``InputError``."""
    path = Path(path)
    try:
        size = path.stat().st_size
        raw = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError) as err:
        raise InputError(f"{path}: cannot read ({err.__class__.__name__})") from None
    trace = Trace(source=str(path))
    sink = _Sink(trace)
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {path.name}", file=sys.stderr,
               disable=True if not progress else None, leave=False)  # None: only on a terminal
    try:
        with raw:
            _parse(_open_stream(raw), sink, bar, trace)
    except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise InputError(f"{path}: malformed trace JSON (after {trace.bytes_read} bytes): {reason}") from None
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{path}: cannot decompress/read trace: {err}") from None
    finally:
        bar.close()
    if not sink.saw_events:
        raise InputError(f"{path}: not a Kineto/Chrome trace (no 'traceEvents' list)")
    return trace


def _open_stream(raw: IO[bytes]) -> IO[bytes]:
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _parse(stream: IO[bytes], sink: _Sink, bar: tqdm, trace: Trace) -> None:
    raw = getattr(stream, "fileobj", None) or stream
    first = stream.read(CHUNK)
    stripped = first.lstrip()
    if not stripped:
        raise InputError(f"{trace.source}: empty file")
    bare_list = stripped[:1] == b"["
    events: list[Any] = ijson.sendable_list()
    props: list[Any] = ijson.sendable_list()
    parsers = [(ijson.items_coro(events, "item" if bare_list else "traceEvents.item", use_float=True),
                events, sink.event)]
    if not bare_list:
        parsers.append((ijson.items_coro(props, "deviceProperties.item", use_float=True), props, sink.device))
    chunk = first
    last = 0
    while chunk:
        for coro, out, handle in parsers:
            coro.send(chunk)
            _drain(out, handle)
        pos = raw.tell()
        bar.update(pos - last)
        last = pos
        trace.bytes_read += len(chunk)
        chunk = stream.read(CHUNK)
    for coro, out, handle in parsers:
        coro.close()
        _drain(out, handle)


def _drain(out: list[Any], handle: Callable[[Any], None]) -> None:
    for item in out:
        handle(item)
    del out[:]


class _Sink:
    """Turns decoded events into compact records; counts what it drops by category."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.saw_events = False
        self._strings: dict[str, str] = {}
        self._dims: dict[Any, Any] = {}

    def _s(self, value: Any) -> str:
        text = str(value)
        return self._strings.setdefault(text, text)

    def _skip(self, cat: str) -> None:
        skipped = self.trace.skipped
        skipped[cat] = skipped.get(cat, 0) + 1

    def device(self, item: Any) -> None:
        if not isinstance(item, dict):
            return
        dev = DeviceProps(
            id=_int(item.get("id"), 0), name=str(item.get("name", "")),
            num_sms=_int(item.get("numSms"), 0),
            max_threads_per_sm=_int(item.get("maxThreadsPerMultiprocessor"), 0),
            regs_per_sm=_int(item.get("regsPerMultiprocessor"), 0),
            smem_per_sm=_int(item.get("sharedMemPerMultiprocessor"), 0),
            warp_size=_int(item.get("warpSize"), 32),
        )
        self.trace.devices[dev.id] = dev

    def event(self, ev: Any) -> None:
        self.saw_events = True
        trace = self.trace
        trace.events_read += 1
        if not isinstance(ev, dict):
            self._skip("<not an object>")
            return
        ph = ev.get("ph")
        cat = str(ev.get("cat", "")).lower()
        if ph in ("s", "f") and cat == "ac2g":
            fid = _int(ev.get("id"), None)
            ts = _float(ev.get("ts"))
            if fid is not None and ts is not None:
                trace.flows.append(Flow(fid, ph, _int(ev.get("pid"), 0), _tid(ev.get("tid")), ts))
            return
        if ph != "X":
            self._skip(f"ph={ph}")
            return
        ts = _float(ev.get("ts"))
        dur = _float(ev.get("dur"))
        if ts is None or dur is None or dur < 0:
            self._skip(f"{cat or '<no cat>'} without ts/dur")
            return
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        name = self._s(ev.get("name", ""))
        if cat in _GPU_CATS:
            self._gpu(_GPU_CATS[cat], name, ev, args, ts, dur)
        elif cat in _API_CATS:
            trace.host_calls.append(HostCall(name, _int(ev.get("pid"), 0), _tid(ev.get("tid")), ts, dur,
                                             _int(args.get("correlation"), None)))
        elif cat == "user_annotation":
            trace.ranges.append(Range(name, _int(ev.get("pid"), 0), _tid(ev.get("tid")), ts, dur))
        elif cat in _OP_CATS:
            trace.cpu_ops.append(CpuOp(name, _tid(ev.get("tid")), ts, dur, self._shapes(args.get("Input Dims")),
                                       self._types(args.get("Input type"))))
        elif cat == "cuda_sync":
            trace.syncs.append(SyncOp(
                kind=self._s(args.get("cuda_sync_kind", name)),
                device=_int(args.get("device", ev.get("pid")), 0),
                stream=_int(args.get("stream", ev.get("tid")), -1),
                corr=_int(args.get("correlation"), None),
                wait_on_stream=_known(args.get("wait_on_stream")),
                record_corr=_known(args.get("wait_on_cuda_event_record_corr_id")),
                event_id=_known(args.get("wait_on_cuda_event_id")),
            ))
        else:
            self._skip(cat or "<no cat>")

    def _gpu(self, kind: str, name: str, ev: dict[str, Any], args: dict[str, Any], ts: float,
             dur: float) -> None:
        stream = _int(args.get("stream"), None)
        if stream is None:
            stream = _tid(ev.get("tid"))
        self.trace.gpu_ops.append(GpuOp(
            kind=kind, name=name, device=_int(args.get("device", ev.get("pid")), 0), stream=stream, ts=ts,
            dur=dur, corr=_int(args.get("correlation"), None), grid=self._dim3(args.get("grid")),
            block=self._dim3(args.get("block")), regs=_int(args.get("registers per thread"), None),
            smem=_int(args.get("shared memory"), None), blocks_per_sm=_float(args.get("blocks per SM")),
            occupancy_pct=_float(args.get("est. achieved occupancy %")), nbytes=_int(args.get("bytes"), None),
        ))

    def _dim3(self, value: Any) -> tuple[int, int, int] | None:
        if not isinstance(value, list) or not value or len(value) > 3:
            return None
        try:
            dims = tuple(int(v) for v in value) + (1,) * (3 - len(value))
        except (TypeError, ValueError):
            return None
        return self._dims.setdefault(dims, dims)

    def _shapes(self, value: Any) -> tuple[tuple[int, ...] | None, ...]:
        if not isinstance(value, list):
            return ()
        out: list[tuple[int, ...] | None] = []
        for dims in value:
            shape = None
            if isinstance(dims, list) and all(isinstance(d, int | float) for d in dims):
                shape = tuple(int(d) for d in dims)
            out.append(shape)
        key = tuple(out)
        return self._dims.setdefault(key, key)

    def _types(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list):
            return ()
        key = tuple(self._s(v) for v in value)
        return self._dims.setdefault(("types", *key), key) if key else ()


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _int(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _known(value: Any) -> int | None:
    """An id field of a ``cuda_sync`` record; Kineto writes -1 where it does not know the value."""
    number = _int(value, None)
    return None if number is None or number < 0 else number


def _tid(value: Any) -> int:
    """Thread/stream ids are ints, or strings like ``"stream 7"`` / ``"7"`` in older traces."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        digits = value.rsplit(" ", 1)[-1]
        try:
            return int(digits)
        except ValueError:
            return hash(value) & 0x7FFFFFFF
    return 0
