"""Reading the layer-trace runs of ``kernels_real.bench`` (``--trace-timed-graphs``): every traced kernel of a
point's sequential and multi_stream CUDA-graph replays (``kernels.json[.gz]``: name, start, duration, stream,
grid, block, registers, shared memory), split into layers and matched between strategies by (name, occurrence).

The benchmarks that compare a multi_stream layer with its sequential self read runs through these, and so does
the in-situ memory-latency fit (``calibration.fit_latency``); :func:`launch_geometry` gives a traced kernel's
blocks, blocks per SM and warps by the GH100's occupancy limits."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from simulator.errors import InputError
from simulator.kineto.demand import is_gemv, name_family, resident_blocks
from simulator.kineto.events import DeviceProps
from simulator.kineto.overlay import occurrence_keys

Kernel = dict[str, Any]


def load_kernel_records(run: Path) -> list[dict[str, Any]]:
    """The run's records: one per (preset, tokens, strategy, mode) traced, with its ``kernels`` and ``layers``."""
    for name, read in (("kernels.json.gz", lambda p: gzip.decompress(p.read_bytes())),
                       ("kernels.json", lambda p: p.read_bytes())):
        path = run / name
        if path.is_file():
            return json.loads(read(path))
    raise InputError(f"{run}: no kernels.json(.gz) (a bench run with graph traces)")


def layers_of(record: dict[str, Any], replays: int) -> list[list[Kernel]]:
    """The record's kernels split into its layers, the first replay's layers dropped."""
    kernels, count = record["kernels"], int(record["layers"])
    if count < 1 or len(kernels) % count:
        raise InputError(f"{record['trace']}: {len(kernels)} kernels do not split into {count} layers")
    size = len(kernels) // count
    layers = [kernels[i * size:(i + 1) * size] for i in range(count)]
    first_replay = count // replays
    return layers[first_replay:] if replays > 1 and 0 < first_replay < count else layers


def keyed(layer: list[Kernel]) -> dict[tuple[str, int], Kernel]:
    """Each kernel under (name, occurrence in the layer), the overlay's matching key."""
    names = [k["name"] for k in layer]
    return dict(zip(occurrence_keys(names, max(len(names), 1)), layer, strict=True))


def aux_stream(layer: list[Kernel]) -> object:
    """The stream with fewer of the layer's kernels (the shared experts'); the main stream runs the routing."""
    counts: dict[object, int] = {}
    for k in layer:
        counts[k["stream"]] = counts.get(k["stream"], 0) + 1
    return min(counts, key=lambda s: counts[s])


def replays_per_trace(trace: Path) -> int:
    """Back-to-back graph replays a bench trace holds (its ``moesim_graph_replays_per_trace``; 1 without it)."""
    if not trace.is_file():
        return 1
    return int(json.loads(gzip.decompress(trace.read_bytes())).get("moesim_graph_replays_per_trace", 1))


def is_grouped_gemm(name: str) -> bool:
    """Whether a kernel is the routed experts' grouped GEMM (CUTLASS's grouped kernel), not its data preparation."""
    return "GroupProblemShape" in name or ("grouped_gemm" in name.lower() and "prepare" not in name)


def is_gemm(name: str) -> bool:
    """Whether a kernel is one of the layer's GEMMs (a GEMM or GEMV by its name, as the trace what-if families it:
    ``simulator.kineto.demand.name_family``), not the grouped GEMM's data preparation."""
    return (name_family(name) in ("gemm", "grouped_gemm") or is_gemv(name)) and "prepare" not in name


def router_position(layer: list[Kernel]) -> int | None:
    """Position in a multi_stream layer of the routing head's GEMM: the main stream's first GEMM that is not the
    grouped GEMM (None: the layer has none)."""
    aux = aux_stream(layer)
    return next((i for i, k in enumerate(layer)
                 if k["stream"] != aux and is_gemm(k["name"]) and not is_grouped_gemm(k["name"])), None)


def layer_gemms(layer: list[Kernel]) -> tuple[list[Kernel], list[Kernel], list[Kernel]]:
    """A multi_stream layer's GEMMs in launch order: the aux stream's (the shared experts'), the routing head's
    (:func:`router_position`; none or one) and the grouped GEMMs."""
    aux = aux_stream(layer)
    at = router_position(layer)
    return ([k for k in layer if k["stream"] == aux and is_gemm(k["name"])], [] if at is None else [layer[at]],
            [k for k in layer if is_grouped_gemm(k["name"])])


# one GH100 die (the H200 and the H100): per SM its threads, registers and shared memory; the warp size
GH100 = DeviceProps(0, "GH100", 132, 2048, 65536, 233472, 32)


def launch_geometry(kernel: Kernel) -> tuple[int, int, int]:
    """(blocks, blocks one SM holds by threads / registers / shared memory, warps per block) of a traced kernel of
    the H200 / H100 (one GH100 die: the occupancy rules of ``simulator.kineto.demand.resident_blocks``)."""
    blocks = kernel["grid"][0] * kernel["grid"][1] * kernel["grid"][2]
    threads = kernel["block"][0] * kernel["block"][1] * kernel["block"][2]
    op = SimpleNamespace(block=kernel["block"], regs=kernel["registers per thread"], smem=kernel["shared memory"])
    return blocks, resident_blocks(op, GH100) or 1, max(1, -(-threads // GH100.warp_size))
