"""Streaming reader of Kineto / Chrome-trace JSON (plain or gzipped) into compact :class:`Trace` records.

The event list is read in blocks, cut into runs of whole events and each run decoded by a C JSON decoder
(orjson when installed, else the standard library's); files it cannot cut (another layout, or malformed) go
through ijson's push parsers. Either way memory grows with the events kept (a few small tuples per GPU op, API
call, range, module call and operator), never with the file: other python events, memory events and unknown
categories are dropped as they stream past. A tqdm bar on stderr counts the bytes read.
"""

from __future__ import annotations

import gzip
import re
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
BLOCK = 1 << 18  # the fast path decodes runs of events about this long
MAX_HEADER = 1 << 26  # bytes before the event list the fast path looks through
MAX_EVENT_RUN = 1 << 28  # a run this long without a cut between events: not a Kineto layout
_LIST_OPEN = re.compile(rb"\s*:\s*\[")
_NEXT_EVENT = re.compile(rb"\s*,\s*\{")
_INSTANCE = re.compile(r"_\d+$")  # the instance number of nn.Module: Class_N
_FORWARD = re.compile(r"([^/\\]+\.py\(\d+\)): forward$")  # a module's forward frame: file.py(line)

try:  # a faster decoder of the event runs when installed; the standard library's otherwise
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the environment
    from json import loads as _loads

_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
             "memset": "memset", "concurrent kernel": "kernel"}
_API_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver"}
_OP_CATS = {"cpu_op", "operator"}
# runtime calls that only query or set attributes: never launch, record, wait or synchronize (not kept)
_QUERIES = frozenset(f"{api}{call}" for api in ("cuda", "hip") for call in (
    "OccupancyMaxActiveBlocksPerMultiprocessor", "OccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "DeviceGetAttribute", "DriverGetVersion", "RuntimeGetVersion", "PeekAtLastError", "GetLastError",
    "FuncSetAttribute", "FuncGetAttributes", "GetDevice", "SetDevice", "GetDeviceCount", "GetDeviceProperties",
    "StreamIsCapturing", "StreamGetCaptureInfo", "PointerGetAttributes", "GetFuncBySymbol", "GetDriverEntryPoint"))
# operators that never launch GPU work, so never enclose a launch: not kept (half the operators of a trace)
_NO_GPU_WORK = frozenset(f"aten::{op}" for op in (
    "as_strided", "empty", "empty_strided", "empty_like", "slice", "view", "transpose", "t", "expand", "unsqueeze",
    "squeeze", "permute", "resolve_conj", "resolve_neg", "detach", "alias", "_unsafe_view", "select", "narrow",
    "split", "resize_", "lift_fresh", "_reshape_alias", "result_type", "numpy_T", "mT", "mH"))


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
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {path.name}", file=sys.stderr,
               disable=True if not progress else None, leave=False)  # None: only on a terminal
    trace = Trace(source=str(path))
    sink = _Sink(trace)
    try:
        with raw:
            try:
                _parse_split(_open_stream(raw), sink, bar, trace)
            except _NotSplittable:  # an unusual layout or a malformed file: the streaming parser says which
                raw.seek(0)
                bar.reset()
                trace = Trace(source=str(path))
                sink = _Sink(trace)
                _parse(_open_stream(raw), sink, bar, trace)
                raw.seek(0)
                trace.metadata = _top_level_scalars(_open_stream(raw))
    except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, ValueError) as err:
        where = f" (after {trace.bytes_read} bytes)" if trace.bytes_read else ""
        raise InputError(f"{path}: malformed trace JSON{where}: {_reason(err)}"
                         + ("; the file is binary or corrupt, not JSON text" if _binary(path) else "")) from None
    except (OSError, EOFError, zlib.error) as err:
        raise InputError(f"{path}: cannot decompress/read trace: {_reason(err)}") from None
    finally:
        bar.close()
    if not sink.saw_events:
        raise InputError(f"{path}: not a Kineto/Chrome trace (no 'traceEvents' list)")
    if flows_redundant(trace):
        trace.flows.clear()
    if trace.modules:
        trace.frames.clear()  # forward frames only stand in for missing module events
    return trace


def flows_redundant(trace: Trace) -> bool:
    """Whether the trace's ``ac2g`` flows say nothing its GPU ops do not: they only stand in for a GPU op's missing
    correlation id, and every GPU op has one."""
    return all(op.corr is not None for op in trace.gpu_ops)


def _reason(err: BaseException) -> str:
    """The first line of an error, printable: yajl's messages are bytes (``b'lexical error…'``) and quote the
    offending input, which in a binary file is control characters."""
    text = str(err.args[0]) if err.args and isinstance(err.args[0], str) else str(err)
    if err.args and isinstance(err.args[0], bytes):
        text = err.args[0].decode("utf-8", "replace")
    line = next((part.strip() for part in text.splitlines() if part.strip()), err.__class__.__name__)
    line = "".join(c if c.isprintable() else "?" for c in line)
    return line if len(line) <= 120 else line[:117] + "..."


def _binary(path: Path) -> bool:
    """Whether the (decompressed) start of ``path`` holds control characters that JSON text never has."""
    try:
        with path.open("rb") as raw:
            head = _open_stream(raw).read(4096)
    except (OSError, EOFError, zlib.error):
        return True
    return any(b < 32 and b not in (9, 10, 13) for b in head)


def _open_stream(raw: IO[bytes]) -> IO[bytes]:
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


class _NotSplittable(Exception):
    """The fast path cannot cut this file into whole events; the streaming parser reads it instead."""


def _parse_split(stream: IO[bytes], sink: _Sink, bar: tqdm, trace: Trace) -> None:
    """Cut the ``traceEvents`` list into runs of whole events at ``},{`` boundaries and decode each run with a C
    JSON decoder (orjson when installed, else the standard library's): linear in the file, memory bounded by
    the block size. A cut inside an event (a ``},{`` within it) fails to decode and the cut before it is tried;
    the top-level keys before and after the list are kept in ``trace.metadata``."""
    raw = getattr(stream, "fileobj", None) or stream
    buf = b""
    last = 0

    def more() -> bool:
        nonlocal buf, last
        chunk = stream.read(BLOCK)
        trace.bytes_read += len(chunk)
        pos = raw.tell()
        bar.update(pos - last)
        last = pos
        buf += chunk
        return bool(chunk)

    start = None
    while start is None and more():  # the header: everything up to the list's '['
        start = _events_start(buf)
        if start is None and len(buf) > MAX_HEADER:
            raise _NotSplittable
    if start is None:
        if not buf.strip():
            raise InputError(f"{trace.source}: empty file")
        raise _NotSplittable
    bare = buf.lstrip()[:1] == b"["
    if not bare:
        head = buf[:start]
        head = head[:head.rfind(b'"traceEvents"')].rstrip().rstrip(b",")
        try:
            meta = _loads(head + b"}")
        except ValueError:
            raise _NotSplittable from None
        sink.metadata(meta)
    buf = buf[start:]
    while more():
        run = _decode_run(buf)
        if run is None:
            if len(buf) > MAX_EVENT_RUN:
                raise _NotSplittable
            continue
        events, rest = run
        for event in events:
            sink.event(event)
        buf = buf[rest:]
    try:
        tail = _loads(b"[" + buf) if bare else _loads(b'{"traceEvents":[' + buf)
    except ValueError:
        raise _NotSplittable from None
    events = tail if bare else tail.pop("traceEvents")
    for event in events:
        sink.event(event)
    if not bare:
        sink.metadata(tail)
    sink.saw_events = True


def _top_level_scalars(stream: IO[bytes]) -> dict[str, object]:
    """The top-level keys with a number or string value (one more streaming pass: the fallback path only)."""
    out: dict[str, object] = {}
    for prefix, event, value in ijson.parse(stream, use_float=True):
        if "." not in prefix and prefix and event in ("number", "string"):
            out[prefix] = value
    return out


def _events_start(buf: bytes) -> int | None:
    """Index just after the ``[`` that opens the event list (``"traceEvents": [`` or a bare top-level list)."""
    stripped = buf.lstrip()
    if stripped[:1] == b"[":
        return len(buf) - len(stripped) + 1
    at = buf.find(b'"traceEvents"')
    match = _LIST_OPEN.match(buf, at + len(b'"traceEvents"')) if at >= 0 else None
    return match.end() if match else None


def _decode_run(buf: bytes) -> tuple[list[Any], int] | None:
    """The events before the last ``}`` ``,`` ``{`` boundary of ``buf`` that decodes, and where the rest
    starts; None when there is none (yet)."""
    limit = len(buf)
    failures = 0
    while failures < 8:
        at = buf.rfind(b"}", 0, limit)
        if at < 0:
            return None
        limit = at
        match = _NEXT_EVENT.match(buf, at + 1)
        if match is None:
            continue
        try:
            events = _loads(b"[" + buf[:at + 1] + b"]")
        except ValueError:
            failures += 1
            continue
        return events, match.end() - 1
    return None


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

    def metadata(self, meta: dict[str, Any]) -> None:
        """Top-level keys other than the event list; ``deviceProperties`` are read as devices."""
        self.trace.metadata.update(meta)
        for item in meta.get("deviceProperties") or ():
            self.device(item)

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
        if ph == "s" and cat == "ac2g":
            return  # the launch end of a flow: the GPU end alone names the op it belongs to
        if ph == "f" and cat == "ac2g":
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
            if name in _QUERIES:
                self._skip("runtime queries")
                return
            trace.host_calls.append(HostCall(name, _int(ev.get("pid"), 0), _tid(ev.get("tid")), ts, dur,
                                             _int(args.get("correlation"), None)))
        elif cat == "python_function":
            self._python(name, ev, ts, dur)
        elif cat == "user_annotation":
            trace.ranges.append(Range(name, _int(ev.get("pid"), 0), _tid(ev.get("tid")), ts, dur))
        elif cat in _OP_CATS:
            if name in _NO_GPU_WORK:
                self._skip("cpu_op without GPU work")
                return
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

    def _python(self, name: str, ev: dict[str, Any], ts: float, dur: float) -> None:
        """Keep module calls (``nn.Module: Class_N`` as ``Class``) and ``forward`` frames (``file.py(N)``) of
        ``with_stack``; every other Python event is dropped."""
        if name.startswith("nn.Module: "):
            self.trace.modules.append(Range(self._s(_INSTANCE.sub("", name[11:])), _int(ev.get("pid"), 0),
                                            _tid(ev.get("tid")), ts, dur, "module"))
            return
        frame = _FORWARD.search(name) if not self.trace.modules else None  # frames only stand in for modules
        if frame is not None:
            self.trace.frames.append(Range(self._s(frame.group(1)), _int(ev.get("pid"), 0), _tid(ev.get("tid")),
                                           ts, dur, "module"))
            return
        self._skip("python_function")

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
