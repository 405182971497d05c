"""Carry what a calibrated profile measured, and no public figure gives, into a datasheet profile of another GPU.

A datasheet profile (MI300X, B200) has vendor figures for its ceilings, SM/CU count and links, but nothing on
how kernels share the device or on a graph's cross-stream edge. Rather than assume ideal sharing there, this
copies from the calibrated profile, each with a source that says it was carried and not measured on that GPU:

- ``host.graph_join_us``: the cost of a fork/join edge inside a replayed graph, and ``host.graph_first_fork_us``:
  what a multi-stream replay loses once, at its first fork;
- ``host.node_gap_us`` and ``host.kernel_gap_us``: the device's gap between dependent kernels inside a replayed
  graph and between eagerly launched ones with the host ahead (the command front-end's, not the host CPU's: the
  host API costs stay the datasheet profile's typical figures);
- ``memory_latency``: the latency-bound kernels' slowdown against the share of the HBM ceiling the others draw
  (per kernel class; block placement reads it);
- ``issue_warps``: the resident warps per SM (wavefronts per CU) at which a light-block GEMM's blocks saturate it
  (block placement's packing law; the H200, B200 and MI300X each issue from four schedulers / SIMDs per SM / CU),
  and the same per kernel class (``issue_warps_by_kernel``: a class of the calibrated GPU's libraries, labelled so);
- ``interference``: the sharing form and its dimensionless parameters (shares of the SM slots, of the HBM and
  tensor ceilings, slowdown per unit of the others' bandwidth demand; each GPU's own ceilings scale them);
- the ``resident`` mode of the GEMM families (which SM resources a running GEMM holds: read from the calibrated
  GPU's traced kernels, so a statement about its libraries' kernels, not the other vendor's);
- with ``--kernel-tables``, only for a GPU of the same chip (the H100 from the H200: one GH100 die, the same SMs,
  clocks and libraries; only the HBM differs): the measured kernel tables and the fitted kernel families, each
  family at its measured rate capped by the target's ceiling, and the grouped GEMM's shard law
  (:func:`with_kernel_tables`). The profile records
  the GPU, ceilings and families the tables were measured under (``kernel_tables_from``), and the cost model moves
  the share of a looked-up time the family's roofline spends streaming there to the family's rate here
  (``simulator.cost.transferred_time``); the rest stays as measured.

With ``--geometry``, measurement folders of the target GPU give it the GEMM launches recorded there
(``launch_geometry``, ``calibration.fit_geometry``): a fact of that GPU and its libraries, never carried (the
H100's cuBLAS picks another kernel or grid than the H200's for some shapes).

With ``--graph-corun``, a graph co-run run measured on the target GPU (``calibration.microbench.graph_corun``) gives
it its own ``host.graph_join_us`` (``calibration.fit.graph_join_figure``, the source profile's held-out presets left
out as there), in place of the carried one.

With ``--replay-lengths``, a replay-length run measured on the target GPU (``kernels_real.replay_length_probe``)
gives it its own ``host.graph_first_fork_us`` (``calibration.fit_replay``), in place of the carried one.

With ``--score-runs``, runs measured on the target GPU (each run's ``env.json`` names it) score the carried
profile's multi_stream choices (``fit.decisions``, as ``moesim calibrate`` records them; ``moesim thresholds``
prints the verdict). Nothing is fitted to them.

``python -m calibration.carry --from h200 --to mi300x b200`` rewrites the ``--to`` profiles in place;
``python -m calibration.carry --from h200 --to h100 --kernel-tables --score-runs RUN...`` the H100's, with the
tables and the H100's runs scoring it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from calibration.fit import decisions_report, graph_corun_records, graph_join_figure
from calibration.fit import with_first_fork as fit_first_fork
from calibration.fit_geometry import launch_geometries
from calibration.fit_geometry import sources_in as geometry_sources
from simulator.errors import InputError
from simulator.outputs import write_text_atomic
from simulator.profile import Profile, load_profile, parse_profile
from simulator.validation import recorded_holdout

CARRIED_FAMILIES = ("gemm", "gemm_fp32", "grouped_gemm")
DEVICE_GAPS = ("node_gap_us", "kernel_gap_us")
GRAPH_EDGES = ("graph_join_us", "graph_first_fork_us")


def carried(target: dict[str, Any], source: Profile, source_datasheet: Profile | None = None) -> dict[str, Any]:
    """The profile document ``target`` with ``source``'s graph fork/join cost, device-side kernel gaps,
    memory-latency curves, issue warps, sharing model and GEMM residency, and, given the source GPU's datasheet
    profile, its kernel tables and families (:func:`with_kernel_tables`), each labelled (the rest of the document
    as it was)."""
    if source.provenance != "calibrated":
        raise InputError(f"{source.name}: not a calibrated profile (provenance {source.provenance!r}); "
                         "only measured quantities are carried")
    where = f"{source.name} ({source.hardware.gpu}, {source.date})"
    doc = json.loads(json.dumps(target))
    gpu = parse_profile(doc, target.get("name", "<profile>")).hardware.gpu
    for key in GRAPH_EDGES:
        figure = getattr(source.host, key)
        if figure is not None:
            doc["host"][key] = {
                "value": figure.value,
                "source": f"NOT measured on {gpu} and no public figure: carried from {where}: {figure.source}"}
    for gap in DEVICE_GAPS:
        figure = getattr(source.host, gap)
        doc["host"][gap] = {
            "value": figure.value,
            "source": f"NOT measured on {gpu} and no public figure: carried from {where} (a device-side gap, "
                      f"not a host API cost): {figure.source}"}
    latency = source.memory_latency
    if latency is not None:
        doc["memory_latency"] = {
            "points": latency.points, "classes": latency.classes,
            "source": f"NOT measured on {gpu} and no public figure: carried from {where} (a slowdown against the "
                      f"share of this GPU's own HBM ceiling the other kernels draw): {latency.source}"}
    if source.issue_warps is not None:
        doc["issue_warps"] = {
            "value": source.issue_warps.value,
            "source": f"NOT measured on {gpu} and no public figure: carried from {where} (both issue from four "
                      f"schedulers per SM / SIMDs per CU): {source.issue_warps.source}"}
    doc["issue_warps_by_kernel"] = {
        cls: {"value": fig.value,
              "source": f"NOT measured on {gpu} and no public figure: carried from {where} (a kernel class of the "
                        f"calibrated GPU's libraries; this GPU's own may differ): {fig.source}"}
        for cls, fig in source.issue_warps_by_kernel.items()}
    form = source.interference
    doc["interference"] = {
        "form": form.form, "params": dict(form.params), "carried_from": source.name,
        "units": {k: f"{v} [carried from {where}]" for k, v in (form.units or {}).items()},
        "source": f"NOT measured on {gpu}: the sharing model of {where} carried with its dimensionless "
                  f"parameters (this GPU's own ceilings and SM/CU count scale them); {form.source}"}
    if source_datasheet is not None:
        with_kernel_tables(doc, source, source_datasheet, gpu, where)
    families: dict[str, Any] = doc["kernel_families"]
    for name in CARRIED_FAMILIES:
        if name in families and name in source.kernel_families:
            mode = source.kernel_families[name].resident
            families[name]["resident"] = mode
            families[name]["source"] = (f"{_without_carried(families[name]['source'])}; resident={mode} carried from "
                                        f"{where}'s traced kernels (its vendor library's GEMMs, not {gpu}'s)")
    parse_profile(doc, str(doc.get("name")))
    return doc


def with_kernel_tables(doc: dict[str, Any], source: Profile, source_datasheet: Profile, gpu: str, where: str) -> None:
    """Put ``source``'s measured kernel tables and kernel families into ``doc``, a datasheet profile of a GPU of the
    same chip (same vendor and SM count, else InputError); ``source_datasheet``: the source GPU's datasheet profile.

    The same chip runs each kernel family at the rate the source measured, unless the target's HBM (or tensor)
    ceiling is lower: a family streams at min(its rate there, the ceiling the source's dense GEMMs saturate ×
    target / source datasheet figure). A family that never reached that ceiling on the source (the grouped GEMMs'
    pipeline) keeps its rate where it still fits under the target's. Its efficiency here is that rate over this
    profile's (datasheet) ceiling. The tables keep their measured times; the cost model moves their streaming
    share (``simulator.cost.transferred_time``) with ``kernel_tables_from``: the source's ceilings and families."""
    hardware = doc["hardware"]
    if hardware["vendor"] != source.hardware.vendor or hardware["sm_count"] != source.hardware.sm_count:
        raise InputError(f"--kernel-tables: {gpu} ({hardware['vendor']}, {hardware['sm_count']} SMs) is not the chip "
                         f"of {source.hardware.gpu} ({source.hardware.vendor}, {source.hardware.sm_count} SMs); "
                         "kernel times carry only between GPUs of one chip")
    if not source.kernel_tables or "gemm" not in source.kernel_families:
        raise InputError(f"--kernel-tables: {source.name} has no kernel tables or no gemm family")
    hbm, tensor = source.ceilings.hbm_GBps.value, source.ceilings.bf16_tflops.value
    target_hbm, target_tensor = (doc["ceilings"]["hbm_GBps"]["value"], doc["ceilings"]["bf16_tflops"]["value"])
    gemm = source.kernel_families["gemm"]
    # the ceilings the source's dense GEMMs saturate, scaled to the target by the datasheet figures
    read_ceiling = gemm.bw_eff * hbm * target_hbm / source_datasheet.ceilings.hbm_GBps.value
    tensor_ceiling = gemm.tc_eff * tensor * target_tensor / source_datasheet.ceilings.bf16_tflops.value
    rule = (f"its rate on {source.hardware.gpu}, capped at the ceiling {source.name}'s gemm family reaches there × "
            f"this GPU's datasheet figure / {source_datasheet.name}'s ({read_ceiling:.0f} GB/s, "
            f"{tensor_ceiling:.0f} TFLOP/s here), over this profile's ceiling")
    doc["kernel_families"] = {
        name: {**family.model_dump(exclude={"source"}),
               "bw_eff": min(family.bw_eff * hbm, read_ceiling) / target_hbm,
               "tc_eff": min(family.tc_eff * tensor, tensor_ceiling) / target_tensor,
               "source": f"NOT measured on {gpu}: fitted on {where}, the same chip; efficiency = {rule}: "
                         f"{family.source}"}
        for name, family in source.kernel_families.items()}
    doc["kernel_tables"] = {
        key: {**table.model_dump(), "source": f"NOT measured on {gpu}: measured on {where}, the same chip (the "
                                              f"streaming share moves to this GPU: kernel_tables_from): {table.source}"}
        for key, table in source.kernel_tables.items()}
    law = source.grouped_shard_law
    if law is not None:  # the same kernel on the same SMs; a shard's time is a ratio on the carried tables
        doc["grouped_shard_law"] = {**law.model_dump(),
                                    "source": f"NOT measured on {gpu}: {where}, the same chip: {law.source}"}
    doc["kernel_tables_from"] = {
        "gpu": source.hardware.gpu, "hbm_GBps": hbm, "bf16_tflops": tensor,
        "families": {name: family.model_dump() for name, family in source.kernel_families.items()},
        "source": f"{where}: the ceilings and kernel families its tables' times were measured under"}


def with_decisions(doc: dict[str, Any], runs: Sequence[Path]) -> None:
    """Score the profile ``doc`` describes on ``runs`` measured on its GPU (their ``env.json`` files say so, else
    InputError): its multi_stream choices' regret (``calibration.fit.decisions_report``) into ``fit.decisions``."""
    profile = parse_profile(doc, str(doc.get("name")))
    for run in runs:
        gpus = {json.loads(env.read_text()).get("device_name") for env in sorted(run.rglob("env.json"))} - {None}
        if not gpus:
            raise InputError(f"--score-runs {run}: no env.json names the GPU that measured it")
        if gpus != {profile.hardware.gpu}:
            raise InputError(f"--score-runs {run}: measured on {', '.join(sorted(map(str, gpus)))}, not on "
                             f"{profile.hardware.gpu}")
    doc.setdefault("fit", {})["decisions"] = {
        **decisions_report(profile, runs),
        "note": f"scored on runs measured on {profile.hardware.gpu}; nothing is fitted to them"}


def with_geometry(doc: dict[str, Any], folders: Sequence[Path]) -> None:
    """The GEMM launches recorded on the target GPU in ``folders`` into ``doc`` (``launch_geometry``): measured
    on that GPU, not carried (the libraries pick other kernels on another GPU of the same chip)."""
    sources = [s for folder in folders for s in geometry_sources(folder)]
    if not sources:
        raise InputError(f"--geometry: no geometry-probe run, graph co-run or layer-trace run under "
                         f"{', '.join(map(str, folders))}")
    doc["launch_geometry"] = launch_geometries(sources, ", ".join(map(str, sources)))


def with_graph_join(doc: dict[str, Any], run: Path, source: Profile) -> None:
    """``host.graph_join_us`` measured on the target GPU by the graph co-runs of ``run`` (its ``env.json`` names
    that GPU, else InputError), with ``source``'s held-out presets left out as its own fit leaves them."""
    candidates = [run] if run.is_file() else [run / "graph_corun.json.gz", run / "graph_corun" / "graph_corun.json.gz"]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise InputError(f"--graph-corun {run}: no graph_corun.json.gz there")
    env = path.parent / "env.json"
    gpu = parse_profile(doc, str(doc.get("name"))).hardware.gpu
    measured_on = json.loads(env.read_text()).get("device_name") if env.exists() else None
    if measured_on != gpu:
        raise InputError(f"--graph-corun {run}: measured on {measured_on or 'an unnamed GPU (no env.json)'}, "
                         f"not on {gpu}")
    doc["host"]["graph_join_us"] = graph_join_figure(*graph_corun_records(path, recorded_holdout(source)[0]))


def with_first_fork(doc: dict[str, Any], run: Path, source: Profile) -> None:
    """``host.graph_first_fork_us`` measured on the target GPU by the replay-length run ``run``
    (``calibration.fit.with_first_fork``: its environment record names that GPU, else InputError), with
    ``source``'s held-out presets left out as its own fit leaves them; the run joins the measurements."""
    profile = fit_first_fork(parse_profile(doc, str(doc.get("name"))), run, lambda _msg: None,
                             recorded_holdout(source)[0])
    doc["host"]["graph_first_fork_us"] = profile.host.graph_first_fork_us.model_dump()
    doc["measurements"] = profile.measurements


def _without_carried(source: str) -> str:
    """A family's source with an earlier run's carried note removed (carrying twice says it once)."""
    return source.split("; resident=")[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.carry", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", default="h200", help="calibrated profile to carry from (default h200)")
    ap.add_argument("--to", nargs="+", required=True, help="datasheet profiles to rewrite (names or paths)")
    ap.add_argument("--kernel-tables", action="store_true",
                    help="carry the measured kernel tables and fitted kernel families too: only to a GPU of the same "
                         "chip (same vendor and SM count, checked), e.g. the H100 from the H200")
    ap.add_argument("--score-runs", nargs="+", type=Path, default=[],
                    help="bench runs measured on the target GPU (a single --to): score the carried profile's "
                         "multi_stream choices on them (fit.decisions; nothing fitted)")
    ap.add_argument("--geometry", nargs="+", type=Path, default=[],
                    help="measurement folders of the target GPU (a single --to) whose GEMM launches it records "
                         "(geometry-probe runs, layer traces: calibration.fit_geometry): measured there, not carried")
    ap.add_argument("--graph-corun", type=Path, default=None,
                    help="a graph co-run run measured on the target GPU (a single --to; its graph_corun.json.gz or "
                         "folder): the fork/join cost inside a replayed graph measured there, not carried")
    ap.add_argument("--replay-lengths", type=Path, default=None,
                    help="a replay-length run measured on the target GPU (a single --to; python -m "
                         "kernels_real.replay_length_probe): what a multi-stream replay loses at its first fork, "
                         "measured there, not carried")
    ap.add_argument("--source-datasheet", default=None,
                    help="the source GPU's datasheet profile, whose ceilings scale the families' rates "
                         "(default: FROM-datasheet)")
    args = ap.parse_args(argv)
    try:
        source = load_profile(args.source)
        datasheet = (load_profile(args.source_datasheet or f"{source.name}-datasheet") if args.kernel_tables
                     else None)
        outputs = []
        for name in args.to:
            path = _path(name)
            load_profile(path)  # one-line errors for a missing or invalid profile
            outputs.append((path, carried(json.loads(path.read_text()), source, datasheet)))
        if args.geometry:
            if len(outputs) != 1:
                raise InputError("--geometry: name one --to profile (the launches are of one GPU)")
            with_geometry(outputs[0][1], args.geometry)
        if args.graph_corun is not None:
            if len(outputs) != 1:
                raise InputError("--graph-corun: name one --to profile (the run is of one GPU)")
            with_graph_join(outputs[0][1], args.graph_corun, source)
        if args.replay_lengths is not None:
            if len(outputs) != 1:
                raise InputError("--replay-lengths: name one --to profile (the run is of one GPU)")
            with_first_fork(outputs[0][1], args.replay_lengths, source)
        if args.score_runs:
            if len(outputs) != 1:
                raise InputError("--score-runs: name one --to profile (the runs are of one GPU)")
            with_decisions(outputs[0][1], args.score_runs)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path, doc in outputs:
        write_text_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"{path}: carried from {source.name}")
    return 0


def _path(name: str) -> Path:
    """A profile's file: a path as given, or a shipped profile's by name."""
    if name.endswith(".json") or "/" in name:
        return Path(name)
    return Path(str(resources.files("simulator") / "profiles" / f"{name}.json"))


if __name__ == "__main__":
    raise SystemExit(main())
