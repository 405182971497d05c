"""The GEMM launches the BLAS library made on the measured GPU: the profile's ``launch_geometry``.

cuBLAS / CUTLASS pick a GEMM's kernel and grid by heuristics of the exact shape, so the shape path cannot derive
them; block placement needs them (a router GEMM of light blocks packed beside full-SM shared-expert GEMMs runs
several times slower for its whole life). This reads them where they were recorded, launch facts only (kernel
name, grid, block, registers per thread, shared memory per block; no duration, no layer-level outcome):

- ``kernels_real.geometry_probe`` runs (``geometry_probe/geometry.json.gz``): every preset and rank variant's
  GEMMs (shared experts', router's, grouped) at 1-256 tokens inside a replayed graph;
- the decode co-runs inside graphs (``graph_corun/graph_corun.json.gz``): the shared experts' GEMMs (graph S),
  the router's (graph R) and the grouped GEMMs (graph G) of each configuration;
- the layer-trace runs (``layer_traces*/kernels.json.gz`` of ``kernels_real.bench --trace-timed-graphs``): the
  multi_stream layer's aux-stream GEMMs (the shared experts'), the main stream's router GEMM and its grouped GEMMs.

cuBLAS's dot-product GEMV (``dot_kernel``, the fp32 router of few experts at one row) is left out: how its blocks
slow when packed beside full-SM blocks was never measured apart (the placement probe's one-row router ran
``gemvx``), and in the layer traces block placement's packing law puts its slowdown above the measured one at
about half the points (``benchmarks/packed_gemv.py``). A layer that runs it is then not placed
(``simulator.placement.sharing_for``).

Each launch is keyed as the shape path asks for it (``simulator.workloads.torch_ops.LayerEmitter.recorded``):
``mm K=.. N=..`` (bf16 ``F.linear``), ``mm_fp32 K=.. N=..`` (the fp32 router), at the layer's token count, and
``grouped_mm G=.. K=.. N=..`` (``G`` experts) at its routed rows. Where two sources hold the same key they must
agree (the library's choice is a function of the shape on one GPU and build); the count that agree is in the
source line, and a disagreement is an error.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from calibration.layer_traces import (
    is_gemm,
    is_grouped_gemm,
    launch_geometry,
    layer_gemms,
    layers_of,
    load_kernel_records,
)
from simulator.cost import table_key
from simulator.errors import InputError
from simulator.workloads.presets import MoEDims, get_preset

Kernel = dict[str, Any]
Fact = tuple[str, int, Kernel]  # (launch key, tokens or a grouped GEMM's rows, traced kernel)
UNMEASURED_PACKING = ("dot_kernel",)  # kernels whose packed slowdown no probe measured (see the module docstring)


def packing_measured(kernel: str) -> bool:
    """Whether block placement's packing law was measured on this kernel's class (all but cuBLAS's dot GEMV)."""
    return not any(tag in kernel for tag in UNMEASURED_PACKING)


def shared_keys(dims: MoEDims) -> list[str]:
    """The shared experts' GEMMs in launch order: gate/up, down, and the shared gate where the model has one."""
    width = dims.shared_total
    keys = [table_key("mm", K=dims.hidden, N=2 * width), table_key("mm", K=width, N=dims.hidden)]
    return keys + ([table_key("mm", K=dims.hidden, N=1)] if dims.shared_gate else [])


def router_key(dims: MoEDims) -> str:
    return table_key("mm_fp32", K=dims.hidden, N=dims.n_experts)


def grouped_keys(dims: MoEDims) -> list[str]:
    """The routed experts' two grouped GEMMs over the layer's ``G`` experts (torch picks the kernel's tile
    configuration by the rows and the groups, so both are in the key)."""
    return [table_key("grouped_mm", K=dims.hidden, N=2 * dims.moe_intermediate, G=dims.n_experts),
            table_key("grouped_mm", K=dims.moe_intermediate, N=dims.hidden, G=dims.n_experts)]


def _facts(dims: MoEDims, tokens: int, shared: Sequence[Kernel], router: Sequence[Kernel],
           grouped: Sequence[Kernel]) -> Iterator[Fact]:
    """Each traced GEMM under its launch key, at the layer's token count (the grouped GEMMs: at their routed rows,
    ``tokens × top_k``)."""
    for keys, kernels, rows in ((shared_keys(dims), shared, tokens), ([router_key(dims)], router, tokens),
                                (grouped_keys(dims), grouped, tokens * dims.top_k)):
        for key, kernel in zip(keys, kernels, strict=False):
            yield key, rows, kernel


def layer_trace_facts(run: Path) -> Iterator[Fact]:
    """The GEMM launches of a layer-trace run's multi_stream graph layers (the second layer of each record; a
    record whose layer runs on other than two streams, e.g. with a stray copy on a third, is skipped: which
    stream is the shared experts' is then not told by the count of kernels)."""
    for record in load_kernel_records(run):
        if record["strategy"] != "multi_stream" or record["mode"] != "graph":
            continue
        split = layers_of(record, 1)
        layer = split[1] if len(split) > 1 else split[0]
        if len({k["stream"] for k in layer}) != 2:
            continue
        yield from _facts(get_preset(str(record["preset"])), int(record["tokens"]), *layer_gemms(layer))


def _corun_kernels(record: dict[str, Any], graph: str) -> list[Kernel]:
    """The traced kernels of one of a co-run record's solo graphs, names resolved."""
    table = record["kernels"]
    rows = [dict(zip(table["fields"], row, strict=True)) for row in table["graphs"].get(graph, [])]
    return [{**k, "name": table["names"][k["name"]] if isinstance(k["name"], int) else k["name"]} for k in rows]


def graph_corun_facts(path: Path) -> Iterator[Fact]:
    """The GEMM launches of the decode co-runs' solo graphs: S (shared experts), R (routing), G (grouped)."""
    for record in json.loads(gzip.decompress(path.read_bytes())):
        routing = [k for k in _corun_kernels(record, "R") if is_gemm(k["name"]) and not is_grouped_gemm(k["name"])]
        yield from _facts(get_preset(str(record["preset"])), int(record["tokens"]),
                          [k for k in _corun_kernels(record, "S") if is_gemm(k["name"])], routing[:1],
                          [k for k in _corun_kernels(record, "G") if is_grouped_gemm(k["name"])])


def probe_facts(path: Path) -> Iterator[Fact]:
    """The GEMM launches of a ``kernels_real.geometry_probe`` run: per point, the main stream (the one with the
    grouped GEMMs: the router's GEMM, then the two grouped GEMMs) and the aux stream (the shared experts' GEMMs;
    none for a model without them). A router GEMM that cuBLAS runs as two GEMM kernels (the H100's split-K xmma
    GEMM at 8 tokens: the split pass, then a one-slice pass) is keyed by its first, as the layer traces key it
    (``calibration.layer_traces.router_position``)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    for record in doc["records"]:
        dims = get_preset(str(record["preset"]))
        streams = [[k for k in s if is_gemm(k["name"])] for s in record["streams"]]
        main = [s for s in streams if any(is_grouped_gemm(k["name"]) for k in s)]
        aux = [s for s in streams if s and s not in main]
        shared = aux[0] if aux else []
        router = [k for k in main[0] if not is_grouped_gemm(k["name"])] if len(main) == 1 else []
        grouped = [k for k in main[0] if is_grouped_gemm(k["name"])] if len(main) == 1 else []
        expected = (len(shared_keys(dims)) if dims.shared_total else 0, 2)
        if len(aux) > 1 or (len(shared), len(grouped)) != expected or len(router) not in (1, 2):
            raise InputError(f"{path}: {record['preset']} t{record['tokens']}: GEMMs found (shared, router, grouped) "
                             f"{(len(shared), len(router), len(grouped))}, "
                             f"expected ({expected[0]}, 1 or 2, {expected[1]})")
        yield from _facts(dims, int(record["tokens"]), shared, router[:1], grouped)


def sources_in(folder: Path) -> list[Path]:
    """The launch records under a measurement folder: probe runs first, then the co-runs, then layer traces."""
    return [*sorted(folder.glob("*/geometry.json.gz")), *sorted(folder.glob("graph_corun/graph_corun.json.gz")),
            *sorted(p.parent for p in folder.glob("layer_traces*/kernels.json.gz"))]


def _facts_of(source: Path) -> Iterator[Fact]:
    if source.is_dir():
        return layer_trace_facts(source)
    if source.name == "geometry.json.gz":
        return probe_facts(source)
    if source.name == "graph_corun.json.gz":
        return graph_corun_facts(source)
    raise InputError(f"{source}: not a geometry probe, graph co-run or layer-trace run")


def kernel_label(name: str) -> str:
    """A kernel's name as the profile keeps it: whole, or, past 160 characters (CUTLASS's mangled grouped GEMM runs
    to 1,270), its first 120 and a hash of the whole, so that two kernels stay apart and the profile stays small.
    The placement classes read tags near the start (``simulator.placement.issue_class`` / ``latency_class``)."""
    if len(name) <= 160:
        return name
    return f"{name[:120]}…#{hashlib.sha1(name.encode()).hexdigest()[:12]}"


def launch_geometries(sources: Sequence[Path], where: str) -> dict[str, Any]:
    """The profile's ``launch_geometry`` section from ``sources`` (``where``: how the source line names them)."""
    launches: dict[str, dict[int, dict[str, Any]]] = {}
    agree, left_out = 0, set()
    for source in sources:
        for key, tokens, kernel in _facts_of(source):
            if not packing_measured(str(kernel["name"])):
                left_out.add((key, tokens))
                continue
            blocks, per_sm, warps = launch_geometry(kernel)
            fact = {"kernel": str(kernel["name"]), "blocks": blocks, "blocks_per_sm": per_sm,
                    "warps_per_block": warps}
            known = launches.setdefault(key, {}).get(tokens)
            if known is None:
                launches[key][tokens] = fact
            elif known == fact:
                agree += 1
            else:
                raise InputError(f"{source}: {key} at {tokens} tokens launched {fact} where an earlier source "
                                 f"recorded {known}")
    if not launches:
        raise InputError(f"no GEMM launch recorded in {where}")
    count = sum(len(v) for v in launches.values())
    return {"launches": {key: {tokens: {**fact, "kernel": kernel_label(fact["kernel"])}
                               for tokens, fact in sorted(per.items())} for key, per in sorted(launches.items())},
            "source": f"recorded ({where}): {count} GEMM launches ({len(launches)} shapes) as the library made them "
                      f"on this GPU, kernel name and grid / block / registers / shared memory only (no time); "
                      f"{agree} launches recorded twice, all alike; {len(left_out)} launches of cuBLAS's dot_kernel "
                      f"left out (its packing never measured apart) (calibration.fit_geometry)"}
