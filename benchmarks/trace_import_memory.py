"""Peak memory of importing a large Kineto trace (default 500 MB), to show the reader streams.

    python benchmarks/trace_import_memory.py [--mb 500] [--keep PATH]

Writes a synthetic eager trace (launch calls, kernels, flows, operators, and python_function events that the
reader drops) of about ``--mb`` MB, then reads it in a fresh process and prints that process's peak RSS.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.data.kineto.synth import write_large_trace  # noqa: E402

BYTES_PER_KERNEL = 1394  # one launch with its events and four padding events, as written (measured)

READER = """
import resource, sys, time
from simulator.kineto.reader import read_trace
t = time.perf_counter()
trace = read_trace(sys.argv[1], progress=True)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{trace.events_read} events read, {len(trace.gpu_ops)} GPU ops kept, {dt:.1f} s, peak RSS {rss:.0f} MB")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=500.0, help="trace size to generate (MB)")
    parser.add_argument("--keep", help="write the trace here (kept) instead of a temporary file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "large.json"
        kernels = int(args.mb * 1e6 / BYTES_PER_KERNEL)
        t = time.perf_counter()
        size = write_large_trace(str(path), kernels, padding_per_kernel=4)
        print(f"wrote {size / 1e6:.0f} MB ({kernels} kernels) in {time.perf_counter() - t:.1f} s: {path}")
        out = subprocess.run([sys.executable, "-c", READER, str(path)], cwd=ROOT, check=True,
                             capture_output=True, text=True)
        print(f"import: {out.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
