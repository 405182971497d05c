"""The stream-program IR: what one host thread issues, in order, exactly as a CUDA/HIP program would.

A program is written (YAML or JSON) as a list of single-key ops, e.g. ``- launch: {kernel: k, stream: main,
dur_us: 10}``. It is parsed into flat pydantic models that carry an ``op`` tag; ``Program.to_dict`` writes
the single-key form back. The field names are a contract shared with outside tools: add, never rename.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.errors import InputError, describe_validation_error

StreamKind = Literal["default", "blocking", "nonblocking"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StreamSpec(_Strict):
    """A stream: ``default`` is the legacy NULL stream, ``blocking`` streams sync with it implicitly,
    ``nonblocking`` streams (what PyTorch pools hand out) do not."""

    kind: StreamKind = "nonblocking"


class HostCosts(_Strict):
    """Host API costs in eager mode (µs) and graph-replay costs."""

    launch_us: float = Field(0.0, ge=0)
    record_us: float = Field(0.0, ge=0)
    wait_us: float = Field(0.0, ge=0)
    set_stream_us: float = Field(0.0, ge=0)
    sync_us: float = Field(0.0, ge=0)
    replay_us: float = Field(0.0, ge=0, description="host cost of one graph launch")
    node_gap_us: float = Field(0.0, ge=0, description="device gap before each kernel node of a replay")
    kernel_gap_us: float = Field(0.0, ge=0, description="device gap before each eagerly launched kernel")
    join_gap_us: float = Field(0.0, ge=0, description="extra device gap before the first eagerly launched kernel "
                                                      "a stream runs after waiting on another stream's event")
    node_join_gap_us: float = Field(0.0, ge=0, description="the same for a kernel node of a replay (a cross-"
                                                           "stream edge inside a graph)")
    first_fork_gap_us: float = Field(0.0, ge=0, description="extra device gap, once per replay, before the next "
                                                            "kernel of both streams of the replay's first cross-"
                                                            "stream edge (the waiting one and the one it waits on)")
    idle_launch_us: float = Field(0.0, ge=0, description="extra host time of an eager launch onto a stream with "
                                                         "nothing queued or running (the device's queue was drained)")
    queue_depth: int = Field(1024, ge=1, description="launches in flight before the host blocks")


class _Op(_Strict):
    """Common to every op: ``host_us`` overrides the global host API cost of this one call (trace import
    uses it to carry the traced call duration plus the host gap before the next call)."""

    host_us: float | None = Field(None, ge=0)


class Launch(_Op):
    """A kernel launch. ``sm``/``bw``/``tc``: fractions of the device's SMs, peak HBM bandwidth and tensor
    rate the kernel draws when running alone; ``dur_us``: its solo duration."""

    op: Literal["launch"] = "launch"
    kernel: str = Field(min_length=1)
    stream: str
    dur_us: float = Field(ge=0)
    sm: float = Field(0.1, ge=0, le=1)
    bw: float = Field(0.1, ge=0, le=1)
    tc: float = Field(0.0, ge=0, le=1)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    family: str | None = None
    region: str | None = Field(None, description="annotation range the kernel was launched in")
    blocks: int | None = Field(None, ge=1, description="thread blocks in the launch's grid (where known)")
    blocks_per_sm: int | None = Field(None, ge=1, description="how many of its blocks one SM holds at once "
                                                               "(occupancy limit; where known)")
    warps_per_block: int | None = Field(None, ge=1, description="warps in one of its thread blocks (where known)")
    library_kernel: str | None = Field(None, description="the library kernel the launch runs (where recorded): "
                                                         "block placement classes it by this name")
    kernels: int = Field(1, ge=1, description="device kernels the op runs one after another (its duration is their "
                                              "sum); each starts after the device gap")


class Record(_Op):
    op: Literal["record"] = "record"
    event: str = Field(min_length=1)
    stream: str


class Wait(_Op):
    """cudaStreamWaitEvent: ``stream`` waits for the work ``event`` captured when it was last recorded."""

    op: Literal["wait"] = "wait"
    stream: str
    event: str = Field(min_length=1)


class WaitStream(_Op):
    """torch ``Stream.wait_stream``: record a fresh event on ``on`` and make ``stream`` wait on it."""

    op: Literal["wait_stream"] = "wait_stream"
    stream: str
    on: str


class SetStream(_Op):
    """The host switches its current stream (costs host time only)."""

    op: Literal["set_stream"] = "set_stream"
    stream: str


class Sync(_Op):
    """Device synchronize: the host blocks until all queued work has finished."""

    op: Literal["sync"] = "sync"


class CaptureBegin(_Op):
    op: Literal["capture_begin"] = "capture_begin"
    graph: str = Field(min_length=1)
    stream: str


class CaptureEnd(_Op):
    op: Literal["capture_end"] = "capture_end"
    graph: str = Field(min_length=1)


class Replay(_Op):
    op: Literal["replay"] = "replay"
    graph: str = Field(min_length=1)


Op = Annotated[
    Launch | Record | Wait | WaitStream | SetStream | Sync | CaptureBegin | CaptureEnd | Replay,
    Field(discriminator="op"),
]
OP_NAMES = ("launch", "record", "wait", "wait_stream", "set_stream", "sync", "capture_begin", "capture_end",
            "replay")


def _untag(raw: Any) -> Any:
    """``{'launch': {...}}`` -> ``{'op': 'launch', ...}``; anything else is left for the schema to reject."""
    if isinstance(raw, dict) and len(raw) == 1:
        (name, body), = raw.items()
        if name in OP_NAMES:
            if body is None:
                body = {}
            if isinstance(body, dict):
                # YAML 1.1 reads a bare ``on:`` key as the boolean True; wait_stream means the field "on".
                return {"op": name, **{("on" if key is True else key): v for key, v in body.items()}}
    if isinstance(raw, dict) and "op" not in raw:
        return {"op": "|".join(map(str, raw)) or "<empty>"}
    return raw


class Program(_Strict):
    """One host thread's ordered stream operations."""

    name: str | None = None
    streams: dict[str, StreamSpec]
    host: HostCosts = HostCosts()
    ops: tuple[Op, ...]

    @model_validator(mode="before")
    @classmethod
    def _accept_single_key_ops(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("ops"), list):
            data = {**data, "ops": [_untag(o) for o in data["ops"]]}
        return data

    @model_validator(mode="after")
    def _check_references(self) -> Program:
        captured: set[str] = set()
        for index, op in enumerate(self.ops):
            for field in ("stream", "on"):
                name = getattr(op, field, None)
                if name is not None and name not in self.streams:
                    raise ValueError(f"ops[{index}].{op.op}.{field}: undeclared stream {name!r}")
            if isinstance(op, CaptureEnd):
                captured.add(op.graph)
            if isinstance(op, Replay) and op.graph not in captured:
                raise ValueError(f"ops[{index}].replay.graph: graph {op.graph!r} was never captured before")
        return self

    def to_dict(self) -> dict[str, Any]:
        """The single-key YAML/JSON form (defaults left out, so files stay short)."""
        ops = []
        for op in self.ops:
            body = op.model_dump(exclude_defaults=True, exclude={"op"})
            for key in ("reads", "writes"):
                if key in body:
                    body[key] = list(body[key])
            ops.append({op.op: body})
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        out["streams"] = {k: v.model_dump() for k, v in self.streams.items()}
        host = self.host.model_dump(exclude_defaults=True)
        if host:
            out["host"] = host
        out["ops"] = ops
        return out

    def kernels(self) -> Iterable[Launch]:
        return (op for op in self.ops if isinstance(op, Launch))


class _Slow(Exception):
    """The fast path cannot vouch for this input: let the pydantic model decide (and word the error)."""


_EXACT_INT = 2**53  # ints up to this convert to float exactly, whatever the rounding rule


def _number(v: Any, low: float, high: float) -> float:
    """A float field's value as pydantic converts it (ints and floats only; bools are not numbers here)."""
    t = type(v)
    if t is int and -_EXACT_INT <= v <= _EXACT_INT:
        v = float(v)
    elif t is not float:
        raise _Slow
    if low <= v <= high:  # False for NaN, as pydantic's bounds reject it
        return v
    raise _Slow


def _texts(v: Any) -> tuple[str, ...]:
    if type(v) is list or type(v) is tuple:
        for x in v:
            if type(x) is not str:
                raise _Slow
        return tuple(v)
    raise _Slow


def _bounds(field: Any) -> tuple[float, float] | None:
    """A float field's ``ge``/``le`` bounds; None if it has any other constraint."""
    low, high = -math.inf, math.inf
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
        else:
            return None
    return low, high


def _min_length(field: Any) -> int | None:
    """A required plain ``str`` field's minimum length; None for any other kind of field."""
    if field.annotation is not str or not field.is_required():
        return None
    if not field.metadata:
        return 0
    meta = field.metadata[0]
    return meta.min_length if len(field.metadata) == 1 and isinstance(meta, annotated_types.MinLen) else None


_HOST = _Op.model_fields["host_us"]
_HOST_US = _bounds(_HOST)
_LAUNCH = Launch.model_fields
_LAUNCH_KEYS = frozenset(_LAUNCH) - {"op"}
_DUR, _SM, _BW, _TC = (_bounds(_LAUNCH[key]) for key in ("dur_us", "sm", "bw", "tc"))
_SM0, _BW0, _TC0 = (_LAUNCH[key].default for key in ("sm", "bw", "tc"))
_KERNEL_MIN = _min_length(_LAUNCH["kernel"])

# The fast path holds only while the models are what it was written for; otherwise pydantic does it all.
_HOST_FAST = _HOST.annotation == float | None and _HOST.default is None and _HOST_US is not None
_LAUNCH_FAST = _HOST_FAST and tuple(_LAUNCH) == (
    "host_us", "op", "kernel", "stream", "dur_us", "sm", "bw", "tc", "reads", "writes", "family", "region", "blocks",
    "blocks_per_sm", "warps_per_block", "library_kernel", "kernels",
) and None not in (_DUR, _SM, _BW, _TC, _KERNEL_MIN) and _min_length(_LAUNCH["stream"]) == 0 and all(
    _LAUNCH[key].annotation == ann and not _LAUNCH[key].metadata and _LAUNCH[key].default == default
    for key, ann, default in (("reads", tuple[str, ...], ()), ("writes", tuple[str, ...], ()),
                              ("family", str | None, None), ("region", str | None, None),
                              ("library_kernel", str | None, None))
) and _LAUNCH["dur_us"].is_required() and all(_LAUNCH[key].annotation is float for key in ("dur_us", "sm", "bw", "tc"))


def _launch(body: dict[str, Any], streams: dict[str, StreamSpec]) -> dict[str, Any]:
    """A launch's field values in field order, converted as pydantic converts them (floats checked inline,
    anything else through ``_number``/``_texts``)."""
    if not _LAUNCH_KEYS.issuperset(body):
        raise _Slow
    get = body.get
    kernel, stream, dur_us = body["kernel"], body["stream"], body["dur_us"]
    if type(kernel) is not str or len(kernel) < _KERNEL_MIN or type(stream) is not str or stream not in streams:
        raise _Slow
    if type(dur_us) is not float or not _DUR[0] <= dur_us <= _DUR[1]:
        dur_us = _number(dur_us, *_DUR)
    sm, bw, tc = get("sm", _SM0), get("bw", _BW0), get("tc", _TC0)
    if type(sm) is not float or not _SM[0] <= sm <= _SM[1]:
        sm = _number(sm, *_SM)
    if type(bw) is not float or not _BW[0] <= bw <= _BW[1]:
        bw = _number(bw, *_BW)
    if type(tc) is not float or not _TC[0] <= tc <= _TC[1]:
        tc = _number(tc, *_TC)
    host_us, reads, writes, family, region = get("host_us"), get("reads", ()), get("writes", ()), get("family"), \
        get("region")
    library = get("library_kernel")
    if host_us is not None:
        host_us = _number(host_us, *_HOST_US)
    if type(reads) is not tuple or reads:
        reads = _texts(reads)
    if type(writes) is not tuple or writes:
        writes = _texts(writes)
    if (family is not None and type(family) is not str) or (region is not None and type(region) is not str) or \
            (library is not None and type(library) is not str):
        raise _Slow
    blocks, per_sm, warps = get("blocks"), get("blocks_per_sm"), get("warps_per_block")
    kernels = get("kernels", 1)
    if any(count is not None and (type(count) is not int or count < 1) for count in (blocks, per_sm, warps)) or \
            type(kernels) is not int or kernels < 1:
        raise _Slow
    return {"host_us": host_us, "op": "launch", "kernel": kernel, "stream": stream, "dur_us": dur_us, "sm": sm,
            "bw": bw, "tc": tc, "reads": reads, "writes": writes, "family": family, "region": region,
            "blocks": blocks, "blocks_per_sm": per_sm, "warps_per_block": warps, "library_kernel": library,
            "kernels": kernels}


def _plain_table() -> dict[str, tuple[type[BaseModel], frozenset[str], tuple[tuple[str, int, bool], ...]]]:
    """Per op whose fields (besides ``host_us``) are all required strings: its model, its keys and per field
    (name, minimum length, whether it names a stream)."""
    table = {}
    for model in get_args(get_args(Op)[0]):
        fields = dict(model.model_fields)
        name = fields.pop("op").default
        if model is Launch or not _HOST_FAST or list(fields)[:1] != ["host_us"]:
            continue
        del fields["host_us"]
        specs = tuple((key, _min_length(f), key in ("stream", "on")) for key, f in fields.items())
        if all(length is not None for _, length, _ in specs):
            table[name] = (model, frozenset(fields) | {"host_us"}, specs)
    return table


_PLAIN = _plain_table()
_new_object_attr = object.__setattr__


def _plain(name: str, keys: frozenset[str], specs: tuple[tuple[str, int, bool], ...], body: dict[str, Any],
           streams: dict[str, StreamSpec]) -> dict[str, Any]:
    """The field values of an op made of strings only (record, wait, ...), in field order."""
    if not keys.issuperset(body):
        raise _Slow
    host_us = body.get("host_us")
    values = {"host_us": None if host_us is None else _number(host_us, *_HOST_US), "op": name}
    for key, min_length, names_stream in specs:
        v = body[key]
        if type(v) is not str or len(v) < min_length or (names_stream and v not in streams):
            raise _Slow
        values[key] = v
    return values


def _fast_ops(raws: list[Any], streams: dict[str, StreamSpec]) -> tuple[BaseModel, ...]:
    """Build the op models from their single-key forms without pydantic validation, checking stream and
    graph references on the way (as ``Program._check_references`` does); raise ``_Slow`` when unsure."""
    ops = []
    append = ops.append
    captured: set[str] = set()
    # Ops given the same keys share one fields-set: frozen models never add to it (model_copy copies it first),
    # and 40,000 sets would cost more to allocate than the rest of an op.
    fields_sets: dict[tuple[Any, ...], set[str]] = {}
    launch_fast = _LAUNCH_FAST
    for raw in raws:
        if type(raw) is not dict or len(raw) != 1:
            raise _Slow
        (name, body), = raw.items()
        if type(body) is not dict:
            if body is not None or name not in _PLAIN:  # ``sync:`` with no body reads as None
                raise _Slow
            body = {}
        try:
            if name == "launch" and launch_fast:
                model, values = Launch, _launch(body, streams)
            elif name in _PLAIN:
                if name == "wait_stream" and True in body:  # YAML 1.1 reads a bare ``on:`` key as True
                    body = {("on" if key is True else key): v for key, v in body.items()}
                model, keys, specs = _PLAIN[name]
                values = _plain(name, keys, specs, body, streams)
                if name == "capture_end":
                    captured.add(values["graph"])
                elif name == "replay" and values["graph"] not in captured:
                    raise _Slow
            else:
                raise _Slow
        except KeyError:  # a required field is missing
            raise _Slow from None
        op = model.__new__(model)
        _new_object_attr(op, "__dict__", values)
        keys = (name, *body)
        fields_set = fields_sets.get(keys)
        if fields_set is None:
            fields_set = fields_sets[keys] = {"op", *body}
        _new_object_attr(op, "__pydantic_fields_set__", fields_set)
        _new_object_attr(op, "__pydantic_extra__", None)
        _new_object_attr(op, "__pydantic_private__", None)
        append(op)
    return tuple(ops)


def _fast_program(data: dict[str, Any]) -> Program:
    """Validate the few top-level fields with pydantic and the (many) ops with the fast path."""
    ops = data.get("ops")
    if type(ops) is not list or not data.keys() <= Program.model_fields.keys():
        raise _Slow
    head = Program.model_validate({**data, "ops": []})
    fields_set = set(head.model_fields_set)
    fields_set.add("ops")
    return Program.model_construct(fields_set, name=head.name, streams=head.streams, host=head.host,
                                   ops=_fast_ops(ops, head.streams))


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: where many small acyclic objects are built and freed in bulk (a
    decoded document, the op models, an engine run), collections would only cost time (~12 ms of a 50 ms
    JSON decode here)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def parse_program(data: Any, source: str = "<program>") -> Program:
    """Validate an already-decoded document; schema errors become one-line ``InputError``s.

    Well-formed documents take a fast path that builds the op models without per-op pydantic validation;
    anything it does not vouch for is validated by the pydantic model, which also words the errors.
    """
    if not isinstance(data, dict):
        raise InputError(f"{source}: a program is a mapping with 'streams' and 'ops'")
    try:
        with gc_paused():
            return _fast_program(data)
    except (_Slow, ValidationError):
        pass
    try:
        return Program.model_validate(data)
    except ValidationError as err:
        raise InputError(describe_validation_error(err, source)) from None


def read_document(path: str | Path) -> Any:
    """Decode a YAML or JSON file (by suffix; YAML otherwise), with one-line errors."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read ({err.__class__.__name__})") from None
    if path.suffix == ".json":
        try:
            with gc_paused():
                return json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}: malformed JSON at line {err.lineno} column {err.colno}: {err.msg}") from None
    import yaml  # lazily: JSON programs (the large ones) need no YAML parser

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise InputError(f"{path}: malformed YAML{where}: {getattr(err, 'problem', err)}") from None


def load_program(path: str | Path) -> Program:
    """Read and validate a program file."""
    return parse_program(read_document(path), str(path))
