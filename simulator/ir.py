"""The stream-program IR: what one host thread issues, in order, exactly as a CUDA/HIP program would.

A program is written (YAML or JSON) as a list of single-key ops, e.g. ``- launch: {kernel: k, stream: main,
dur_us: 10}``. It is parsed into flat pydantic models that carry an ``op`` tag; ``Program.to_dict`` writes
the single-key form back. The field names are a contract shared with outside tools: add, never rename.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterable
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


def _converter(field: Any) -> Callable[[Any], Any] | None:
    """A check-and-convert function accepting a subset of what pydantic accepts for ``field``, converting
    it exactly as pydantic would; None for fields the fast path does not handle."""
    lo = hi = None
    min_len = 0
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Ge):
            lo = meta.ge
        elif isinstance(meta, annotated_types.Le):
            hi = meta.le
        elif isinstance(meta, annotated_types.MinLen):
            min_len = meta.min_length
        else:
            return None
    ann = field.annotation
    optional = ann is not str and ann is not float and type(None) in get_args(ann)
    base = next((a for a in get_args(ann) if a is not type(None)), None) if optional else ann

    if base is float:
        low, high = (-math.inf if lo is None else lo), (math.inf if hi is None else hi)

        def number(v: Any) -> Any:
            t = type(v)
            if t is float or t is int:
                v = float(v)
                if low <= v <= high:
                    return v
            elif v is None and optional:
                return None
            raise _Slow

        return number
    if base is str and not (optional and min_len):

        def text(v: Any) -> Any:
            if type(v) is str and len(v) >= min_len:
                return v
            if v is None and optional:
                return None
            raise _Slow

        return text
    if ann == tuple[str, ...] and not min_len:

        def texts(v: Any) -> tuple[str, ...]:
            if type(v) is list or type(v) is tuple:
                for x in v:
                    if type(x) is not str:
                        raise _Slow
                return tuple(v)
            raise _Slow

        return texts
    return None


def _op_table() -> dict[str, tuple[type[BaseModel], dict[str, Callable[[Any], Any]], dict[str, Any], tuple[str, ...]]]:
    """Per op name: its model, a converter per field, the defaults in field order (None where required) and
    the required fields. Ops with a field the fast path does not handle are left to pydantic."""
    table = {}
    for model in get_args(get_args(Op)[0]):
        fields = dict(model.model_fields)
        name = fields["op"].default
        defaults = {key: name if key == "op" else None if f.is_required() else f.default for key, f in fields.items()}
        del fields["op"]
        converters = {key: _converter(field) for key, field in fields.items()}
        if all(converters.values()):
            required = tuple(key for key, f in fields.items() if f.is_required())
            table[name] = (model, converters, defaults, required)
    return table


_OPS = _op_table()
_new_object_attr = object.__setattr__


def _fast_ops(raws: list[Any], streams: dict[str, StreamSpec]) -> tuple[BaseModel, ...]:
    """Build the op models from their single-key forms without pydantic validation, checking stream and
    graph references on the way (as ``Program._check_references`` does); raise ``_Slow`` when unsure."""
    ops = []
    captured: set[str] = set()
    for raw in raws:
        if type(raw) is not dict or len(raw) != 1:
            raise _Slow
        (name, body), = raw.items()
        spec = _OPS.get(name)
        if spec is None or type(body) is not dict:
            raise _Slow
        model, converters, defaults, required = spec
        values = dict(defaults)
        given = {"op"}
        for key, value in body.items():
            if key is True:
                key = "on"
            conv = converters.get(key)
            if conv is None:
                raise _Slow
            values[key] = conv(value)
            given.add(key)
        for key in required:
            if values[key] is None:
                raise _Slow
        stream, on = values.get("stream"), values.get("on")
        if (stream is not None and stream not in streams) or (on is not None and on not in streams):
            raise _Slow
        if name == "capture_end":
            captured.add(values["graph"])
        elif name == "replay" and values["graph"] not in captured:
            raise _Slow
        op = model.__new__(model)
        _new_object_attr(op, "__dict__", values)
        _new_object_attr(op, "__pydantic_fields_set__", given)
        _new_object_attr(op, "__pydantic_extra__", None)
        _new_object_attr(op, "__pydantic_private__", None)
        ops.append(op)
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


def parse_program(data: Any, source: str = "<program>") -> Program:
    """Validate an already-decoded document; schema errors become one-line ``InputError``s.

    Well-formed documents take a fast path that builds the op models without per-op pydantic validation;
    anything it does not vouch for is validated by the pydantic model, which also words the errors.
    """
    if not isinstance(data, dict):
        raise InputError(f"{source}: a program is a mapping with 'streams' and 'ops'")
    collecting = gc.isenabled()
    gc.disable()  # building many small objects: collections would only cost time
    try:
        return _fast_program(data)
    except (_Slow, ValidationError):
        pass
    finally:
        if collecting:
            gc.enable()
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
