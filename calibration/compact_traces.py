"""Shrink stored Kineto traces without changing what any reader of this repository gets from them.

A trace's ``ac2g`` flow events (the arrows from a launch call to its GPU op) carry nothing the trace's GPU ops do
not carry already when every GPU op has its ``args.correlation`` id: ``simulator.kineto.reader`` then drops the
flows itself (``flows_redundant``, the rule this tool asks the reader for). Such a trace is rewritten without
them, as JSON without whitespace, gzip level 9. A trace where some GPU op lacks the id is left as it is.

    python -m calibration.compact_traces DIR [DIR ...]     # every traces/*.json.gz below each DIR
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from simulator.errors import InputError
from simulator.kineto.reader import flows_redundant, read_trace
from simulator.outputs import write_bytes_atomic


def compacted(doc: dict) -> dict:
    """The trace (already read by ``simulator.kineto.reader``, so its ``traceEvents`` is a list) without its flows."""
    kept = [e for e in doc["traceEvents"] if not (isinstance(e, dict) and e.get("cat") == "ac2g")]
    return {**doc, "traceEvents": kept}


def compact_file(path: Path) -> tuple[int, int]:
    """Rewrite one trace in place where it can be compacted; (bytes before, bytes after)."""
    before = path.stat().st_size
    try:
        doc = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, EOFError, ValueError) as err:
        raise InputError(f"{path}: not a gzipped JSON trace ({err})") from None
    if not flows_redundant(read_trace(path, progress=False)):
        return before, before
    data = gzip.compress(json.dumps(compacted(doc), separators=(",", ":"), ensure_ascii=False).encode(), 9, mtime=0)
    if len(data) >= before:
        return before, before
    write_bytes_atomic(path, data)
    return before, len(data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.compact_traces", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path, help="folders whose traces/*.json.gz to compact")
    args = ap.parse_args(argv)
    try:
        missing = [d for d in args.dirs if not d.is_dir()]
        if missing:
            raise InputError(f"{missing[0]}: no such folder")
        files = sorted(f for d in args.dirs for f in d.rglob("traces/*.json.gz"))
        if not files:
            raise InputError("no traces/*.json.gz below the folders given")
        total_before = total_after = 0
        for path in files:
            before, after = compact_file(path)
            total_before, total_after = total_before + before, total_after + after
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{len(files)} traces: {total_before / 1e6:.2f} MB -> {total_after / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
