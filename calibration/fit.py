"""Build a calibrated profile from stored measurements (no GPU needed):

- ceilings and host API costs from ``microbench.json`` (as measured, each with how it was measured);
- per-family cost parameters fitted to the solo kernel times (``fit_kernels``);
- the sharing form and its parameters fitted to the co-run pairs (``microbench_corun/microbench.json`` when
  the folder has it, else the main microbench's), three forms compared (``fit_sharing``);
- with kernels_real's ``cases.json`` (eager records from the newest re-measurement, ``eager_rerun_path``):
  per-op families from its traces, the sharing model's layer term and the eager host-cost scale, fitted on
  the calibration split only; the held-out presets and token counts are recorded for ``moesim validate``.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calibration.fit_geometry import launch_geometries
from calibration.fit_geometry import sources_in as geometry_sources
from calibration.fit_graph_corun import (
    FORM_UNITS,
    FORMS,
    SHORT_CHAIN_US,
    compare_forms,
    graph_join_us,
    load_records,
    pieces_of,
)
from calibration.fit_grouped_law import grouped_shard_law
from calibration.fit_host import fit_host_costs, fit_idle_launch
from calibration.fit_kernels import MERGE_X, elems_per_block_from_grids, fit_family, solo_points, solo_tables
from calibration.fit_latency import LATENCY_OPS, ROUTER_RUNS, issue_warps, issue_warps_by_kernel, memory_latency
from calibration.fit_latency_in_situ import memory_latency as memory_latency_in_situ
from calibration.fit_replay import first_fork_figure, load_replay_lengths, replay_length_file
from calibration.fit_sharing import fit_sharing, pairs_from_corun
from calibration.fit_traces import op_points
from calibration.fit_whatif import decode_sets, whatif_decisions_report
from calibration.microbench.shapes import LEGACY_GROUPED_WEIGHTS
from simulator.decisions import score, verdict
from simulator.errors import InputError
from simulator.measured_routing import find_routing
from simulator.profile import Profile, load_profile
from simulator.validation import (
    DEFAULT_HOLDOUT_PRESETS,
    DEFAULT_HOLDOUT_TOKENS,
    eager_rerun_path,
    find_file,
    gain_points,
    load_cases,
    predict_case,
    resolve,
    split_of,
)
from simulator.workloads.presets import get_preset, split_rank_name

HOST_KEYS = ("launch_us", "record_us", "wait_us", "set_stream_us", "sync_us", "replay_us", "node_gap_us",
             "kernel_gap_us")
EAGER_HOST_KEYS = ("launch_us", "record_us", "wait_us", "set_stream_us")
# which microbench host-cost op stands for each kernel family's torch op (launch_by_op_us): cuBLAS matmul for
# the GEMMs, topk for the routing selections, a plain elementwise op for the rest
LAUNCH_OP_OF_FAMILY = {"gemm": "mm", "gemm_fp32": "mm", "grouped_gemm": "mm", "topk": "topk", "sort": "topk",
                       "elementwise": "silu", "reduction": "silu", "gather": "silu", "copy": "silu"}
FP32_VECTOR_TFLOPS = {"H200": 67.0, "H100": 67.0, "B200": 80.0, "MI300X": 163.4}
Progress = Callable[[str], None]


def _read_json(path: Path) -> Any:
    """A JSON document, gzipped where the name ends in .gz (one-line errors)."""
    try:
        return json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: malformed JSON at line {err.lineno}: {err.msg}") from None


def _base_profile(gpu: str) -> Profile:
    """The datasheet profile whose GPU matches (for figures nothing here measures), else the H200's."""
    for name in ("h200-datasheet", "mi300x", "b200"):
        p = load_profile(name)
        if p.hardware.gpu.split()[-1].lower() in gpu.lower():
            return p
    return load_profile("h200-datasheet")


def _rel(path: Path) -> str:
    """``path`` relative to the repository holding the ``calibration`` package when inside it."""
    repo = resolve(".").resolve()
    try:
        return str(path.resolve().relative_to(repo))
    except ValueError:
        return str(path.resolve())


def _fig(value: float, source: str) -> dict[str, Any]:
    return {"value": float(value), "source": source}


def _host(mb: dict[str, Any], base: Profile, where: str) -> dict[str, Any]:
    host = mb.get("host") or {}
    how = host.get("how") or {}
    out: dict[str, Any] = {}
    for key in HOST_KEYS:
        value = host.get(key)
        if isinstance(value, int | float) and value >= 0:
            out[key] = _fig(value, f"measured ({where}): {how.get(key, 'microbench host costs')}")
        else:
            fallback = getattr(base.host, key)
            out[key] = _fig(fallback.value, f"NOT measured (microbench gave none); from {base.name}: "
                                            f"{fallback.source}")
    ctx = host.get("stream_ctx_us")
    if isinstance(ctx, int | float) and ctx > 0:  # torch code switches streams with the context manager
        what = how.get("stream_ctx_us", "the stream context's enter + exit")
        out["set_stream_us"] = _fig(ctx / 2, f"measured ({where}): half of {what} (one switch in, one out: the "
                                             "way torch code switches streams)")
    by_op = host.get("launch_by_op_us") or {}
    out["launch_by_family_us"] = {
        fam: _fig(by_op[op], f"measured ({where}): {how.get('launch_by_op_us', 'microbench host costs')} — {op} "
                             f"stands for the {fam} family")
        for fam, op in LAUNCH_OP_OF_FAMILY.items() if isinstance(by_op.get(op), int | float) and by_op[op] > 0}
    depth = host.get("queue_depth")
    out["queue_depth"] = int(depth) if isinstance(depth, int) and depth > 0 else base.host.queue_depth
    return out


def _families(mb: dict[str, Any], base: Profile, sm_count: int, hbm: float, tensor: float, node_gap: float,
              where: str, gpu: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    solo = mb.get("solo") or []
    templates = dict(base.kernel_families)
    for fam_name in ("elementwise", "topk", "sort", "reduction", "gather", "copy"):
        epb = elems_per_block_from_grids(solo, fam_name)
        if epb and fam_name in templates:
            templates[fam_name] = templates[fam_name].model_copy(update={"elems_per_block": epb})
    points = solo_points(solo, templates, sm_count, node_gap)
    fams: dict[str, dict[str, Any]] = {}
    report: dict[str, Any] = {}
    for name, pts in sorted(points.items()):
        if len(pts) < 2:
            continue
        tmpl = templates[name]
        fit = fit_family(pts, hbm, tensor, tile_m=tmpl.tile_m)
        kept = []
        bw_eff, tc_eff = fit.bw_eff, fit.tc_eff
        if not fit.memory_bound:
            bw_eff = tmpl.bw_eff
            kept.append("bw_eff")
        if not fit.compute_bound and any(p.flops for p in pts):
            tc_eff = tmpl.tc_eff
            kept.append("tc_eff")
        note = (f"; {' and '.join(kept)} not identifiable (no shape on that side of the roofline), kept from "
                f"{base.name}" if kept else "")
        fams[name] = tmpl.model_copy(update={
            "latency_us": round(fit.latency_us, 4), "bw_eff": round(bw_eff, 4), "tc_eff": round(tc_eff, 4),
            "fill_sat": fit.fill_sat,
            "source": f"fitted to {len(pts)} solo shapes ({where}); residuals in fit.kernel_families{note}",
        }).model_dump()
        report[name] = {**fit.residuals, "memory_bound": fit.memory_bound, "compute_bound": fit.compute_bound}
    residency = {"gemm": ("rows", "thin-tile small-M GEMMs hold part of each SM (profiled grids: 64x8 / 128x8 tiles)"),
                 "grouped_gemm": ("full", "torch._grouped_mm's CUTLASS kernel: one full-SM block per SM for its whole "
                                          "run (profiled grid [132,1,1])")}
    for fam_name, (mode, why) in residency.items():
        if fam_name in fams:
            fams[fam_name] = {**fams[fam_name], "resident": mode,
                              "source": fams[fam_name]["source"] + f"; resident={mode}: {why}"}
    if "gemm" in fams:
        key = next((k for k in FP32_VECTOR_TFLOPS if k.lower() in gpu.lower()), None)
        if key is not None:
            ratio = FP32_VECTOR_TFLOPS[key] / base.ceilings.bf16_tflops.value
            fams["gemm_fp32"] = {**fams["gemm"], "tc_eff": round(fams["gemm"]["tc_eff"] * ratio, 5),
                                 "tile_n": base.family("gemm_fp32").tile_n,
                                 "source": f"NOT measured: the fitted bf16 gemm family with tc_eff × {ratio:.4f} "
                                           f"({key} fp32 vector / bf16 dense datasheet peaks)"}
    for name, fam in base.kernel_families.items():
        if name not in fams:
            fams[name] = {**fam.model_dump(), "source": f"NOT measured; from {base.name}: {fam.source}"}
    if "elementwise" in report:
        fams["default"] = {**fams["elementwise"], "source": "the fitted elementwise family (fallback)"}
    return fams, report


def _op_families(doc: dict[str, Any], profile: Profile, folder: Path, calib: Sequence[dict[str, Any]],
                 hbm: float, tensor: float) -> dict[str, Any]:
    """``op:KEY`` families fitted to the real layer's per-op device times (eager traces of the calibration
    split only; ``fit_traces``)."""
    points, kernels, notes = op_points(folder, calib, profile)
    report: dict[str, Any] = {"notes": notes}
    doc = json.loads(json.dumps(doc))
    for key, pts in points.items():
        if len(pts) < 2:
            report[key] = {"n": len(pts), "skipped": "fewer than two distinct shapes"}
            continue
        fit = fit_family(pts, hbm, tensor)
        doc["kernel_families"][f"op:{key}"] = {
            "latency_us": round(fit.latency_us, 4), "bw_eff": round(fit.bw_eff, 4), "tc_eff": round(fit.tc_eff, 4),
            "fill_sat": fit.fill_sat, "kernels": kernels[key],
            "source": f"fitted to the device time of torch op {key!r} in {len(pts)} distinct shapes of kernels_real "
                      f"eager traces (calibration split only)"}
        report[key] = fit.residuals
    doc["fit"]["op_families"] = report
    return doc


def scaled(profile: Profile, host_scale: float) -> Profile:
    """The profile with every eager per-op host cost (API calls and per-family torch-op launches) ×
    ``host_scale``."""
    def times(fig: Any) -> Any:
        return fig.model_copy(update={"value": fig.value * host_scale})

    update: dict[str, Any] = {k: times(getattr(profile.host, k)) for k in EAGER_HOST_KEYS}
    update["launch_by_family_us"] = {k: times(v) for k, v in profile.host.launch_by_family_us.items()}
    return profile.model_copy(update={"host": profile.host.model_copy(update=update)})


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 18) -> float:
    """Minimiser of a unimodal ``f`` on [lo, hi] (log scale)."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def _log_loss(profile: Profile, cases: Sequence[dict[str, Any]]) -> float:
    errs = [math.log(predict_case(profile, c) / float(c["median_us"])) for c in cases]
    return float(np.mean(np.square(errs))) if errs else 0.0


def fit_host_scale(profile: Profile, cases: Sequence[dict[str, Any]]) -> float:
    """The eager host-cost multiplier minimising the squared log error of the eager cases given (the
    calibration split): the microbench's per-op host costs come from another process, and torch ops inside
    the layer carry Python and dispatcher work the bare calls do not."""
    eager = [c for c in cases if c["mode"] == "eager"]
    return _golden(lambda s: _log_loss(scaled(profile, s), eager), 0.25, 8.0) if eager else 1.0


def _layer_gain_errors(profile: Profile, calib: Sequence[dict[str, Any]]) -> Any:
    """``model -> relative errors`` of the multi_stream / sequential time ratio over the calibration split's
    graph cases (the sequential times do not depend on the sharing model: predicted once); None if none."""
    idx = {(c["preset"], c["tokens"], c["strategy"]): c for c in calib if c["mode"] == "graph"}
    duos = [(c, idx[(p, t, "sequential")]) for (p, t, s), c in idx.items()
            if s == "multi_stream" and (p, t, "sequential") in idx]
    if not duos:
        return None
    seq_pred = [predict_case(profile, seq, quick=True) for _, seq in duos]

    def errors(model: Any) -> np.ndarray:
        out = []
        for (ms, seq), sp in zip(duos, seq_pred, strict=True):
            ratio_pred = predict_case(profile, ms, model, quick=True) / sp
            ratio_meas = float(ms["median_us"]) / float(seq["median_us"])
            out.append(ratio_pred / ratio_meas - 1.0)
        return np.array(out)
    return errors


def read_microbench(path: Path) -> dict[str, Any]:
    """A ``microbench.json`` document (one-line errors)."""
    mb = _read_json(path)
    if not isinstance(mb, dict) or not str(mb.get("schema", "")).startswith("moesim.microbench/"):
        raise InputError(f"{path}: not a moesim microbench document (schema moesim.microbench/N)")
    return mb


def fit_profile(folder: str | Path, name: str, holdout_presets: Sequence[str] = DEFAULT_HOLDOUT_PRESETS,
                holdout_tokens: Sequence[int] = DEFAULT_HOLDOUT_TOKENS, progress: Progress | None = None,
                decode: str | Path | None = None, solo_rerun: str | Path | None = None,
                eager_host: str | Path | None = None, replay_lengths: str | Path | None = None) -> Profile:
    """Fit a calibrated profile from a measurements folder holding ``microbench.json`` (and optionally
    kernels_real's ``cases.json``, ``env.json``). ``decode``: a folder of decode-regime measurements
    (``graph_corun/``, bench runs of the rank variants): the graph fork/join cost and the sharing model are
    then taken from the graph co-runs (``fit_decode``), and the model's decisions scored on its bench runs.
    ``solo_rerun``: a later ``microbench.json`` (e.g. ``--only grouped``) whose solo records replace the
    folder's records of the same ops (its grouped GEMMs in the layout measured before 2026-12-04, an A/B's
    other half, left out). ``eager_host``: a bench run with profiler-free host timings of its eager cases
    (``kernels_real.bench --host-costs``): the eager host costs per torch op are then taken from its calibration
    split (``calibration.fit_host``) instead of the microbench figures times a scale fitted to eager layer times,
    and its eager cases are the ones validated (``fit.layer.eager_cases``). ``replay_lengths``: a
    ``kernels_real.replay_length_probe`` run of this GPU: what a multi-stream replay loses once, at its first fork
    (``host.graph_first_fork_us``, ``calibration.fit_replay``), set before the decode-regime fits."""
    say = progress or (lambda _msg: None)
    root = resolve(folder)
    mb_path = find_file(root, "microbench.json", "microbench")
    mb = read_microbench(mb_path)
    files = [_rel(mb_path)]
    table_where: dict[str, str] = {}
    if solo_rerun is not None:
        rerun_path = resolve(solo_rerun)
        rerun = read_microbench(rerun_path)
        redone = [r for r in rerun.get("solo") or [] if r["shape"].get("weights") != LEGACY_GROUPED_WEIGHTS]
        ops = {r["shape"]["op"] for r in redone}
        mb = {**mb, "solo": [r for r in mb.get("solo") or [] if r["shape"]["op"] not in ops] + redone}
        files.append(_rel(rerun_path))
        table_where = {op: f"microbench.json of {rerun['env'].get('gpu')}, {str(rerun['env'].get('date', ''))[:10]}"
                       for op in ops}
    env, ceil = mb.get("env") or {}, mb.get("ceilings") or {}
    gpu = str(env.get("gpu") or "unknown GPU")
    base = _base_profile(gpu)
    where = f"microbench.json of {gpu}, {str(env.get('date', ''))[:10]}"
    for key in ("copy_GBps", "bf16_tflops"):
        if not isinstance(ceil.get(key), int | float) or ceil[key] <= 0:
            raise InputError(f"{mb_path}: ceilings.{key} missing or not positive")
    hbm, tensor = ceil["copy_GBps"] * 1e3, ceil["bf16_tflops"] * 1e6
    sm_count = int(env.get("sm_count") or base.hardware.sm_count)
    host = _host(mb, base, where)
    say("fitting kernel families")
    fams, fam_report = _families(mb, base, sm_count, hbm, tensor, host["node_gap_us"]["value"], where, gpu)
    how = ceil.get("how", "microbench ceilings")
    doc: dict[str, Any] = {
        "name": name, "provenance": "calibrated", "date": str(env.get("date") or "")[:10] or "unknown",
        "hardware": {"gpu": gpu, "vendor": "amd" if env.get("hip") else "nvidia", "sm_count": sm_count,
                     "hbm_GB": round((env.get("total_memory_bytes") or base.hardware.hbm_GB * 1e9) / 1e9, 1),
                     "l2_MB": round(env["l2_bytes"] / (1 << 20), 1) if env.get("l2_bytes") else base.hardware.l2_MB,
                     "capability": env.get("capability"),
                     "source": f"measured: torch.cuda.get_device_properties ({where})"},
        "software": {k: env.get(k) for k in ("driver", "torch", "cuda", "hip")},
        "ceilings": {"hbm_GBps": _fig(ceil["copy_GBps"], f"measured ({where}): {how}"),
                     "bf16_tflops": _fig(ceil["bf16_tflops"], f"measured ({where}): {how}")},
        "host": host, "kernel_families": fams,
        "kernel_tables": {key: {"x": "rows per active expert (µs per active expert)" if key.startswith("grouped_mm")
                                else "rows (M)" if not key.startswith("sort") else "elements",
                                **table,
                                "source": f"measured solo times ({table_where.get(key.split()[0], where)}): "
                                          f"graph-chain period minus node gap; points within {MERGE_X}x in x averaged"}
                          for key, table in solo_tables(mb.get("solo") or [], host["node_gap_us"]["value"]).items()},
        "interference": {"form": "fluid", "params": {}, "source": "placeholder"},
        "link": {**base.link.model_dump(), "topology": f"NOT measured (one GPU); from {base.name}"},
        "measurements": files, "fit": {"kernel_families": fam_report},
        "notes": f"fitted by calibration.fit from {_rel(root)}",
    }
    profile = Profile.model_validate(doc)
    cases_path = find_file(root, "cases.json", "kernels_real")
    calib: list[dict[str, Any]] = []
    if cases_path.exists():
        cases = [c for c in load_cases(root) if c.get("device", "cuda") != "cpu"]
        calib = [c for c in cases if split_of(c, holdout_presets, holdout_tokens) == "calibration"]
        files.append(_rel(cases_path))
        rerun = eager_rerun_path(root)
        if rerun is not None:
            files.append(_rel(rerun))
        routing = find_routing(cases_path)
        if routing is not None:  # the cases are simulated with the experts their weight sets hit
            files.append(_rel(routing))
        say("fitting per-op families on the calibration split's layer traces")
        traced = [c for c in load_cases(root, eager_rerun=False) if c.get("trace")
                  and split_of(c, holdout_presets, holdout_tokens) == "calibration"]
        doc = _op_families(doc, profile, cases_path.parent, traced, hbm, tensor)
        profile = Profile.model_validate(doc)
    say("fitting the sharing model on co-run pairs" + (" and calibration-split layer gains" if calib and decode is None
                                                        else ""))
    corun_path = find_file(root / "microbench_corun", "microbench.json")
    corun = mb.get("corun") or []
    corun_where = where
    if corun_path.exists():  # the newer co-run set: the gated pairs again plus the staggered routing pairs
        corun_doc = _read_json(corun_path)
        corun = (corun_doc.get("corun") if isinstance(corun_doc, dict) else None) or corun
        corun_where = f"{_rel(corun_path)}"
        files.append(_rel(corun_path))
    pairs = pairs_from_corun(corun, profile)
    if len(pairs) >= 2:
        # with decode-regime data the chosen form comes from the graph co-runs (fit_decode), which may take
        # parameters they do not identify from this fit: then no layer-level gain enters it either
        layer = _layer_gain_errors(profile, calib) if calib and decode is None else None
        sharing = fit_sharing(pairs, layer)
        doc["interference"] = {"form": sharing["form"], "params": sharing["params"],
                               "source": f"fitted to {len(pairs)} co-run pairs ({corun_where})"
                                         f"{' and the calibration split of cases.json' if layer else ''}: "
                                         f"{sharing['why']}"}
        doc["fit"]["interference"] = {"chosen": sharing["form"], "why": sharing["why"], **sharing["comparison"]}
    else:
        doc["interference"] = {"form": "fluid", "params": {},
                               "source": "NOT fitted (fewer than two co-run pairs): ideal fluid sharing"}
    profile = Profile.model_validate(doc)
    if eager_host is not None:
        profile = with_host_costs(profile, resolve(eager_host), holdout_presets, holdout_tokens, files, say)
    elif calib:
        say("fitting the eager host-cost scale on the calibration split of cases.json")
        host_scale = fit_host_scale(profile, calib)
        profile = scaled(profile, host_scale)
        doc = json.loads(profile.model_dump_json())
        doc["fit"]["layer"] = {
            "host_scale": round(host_scale, 4), "calibration_cases": len(calib),
            "holdout_presets": list(holdout_presets), "holdout_tokens": list(holdout_tokens),
            "how": "calibration split only (the held-out presets and token counts never enter a fit): per-op "
                   "families from its eager traces, the sharing model's layer term from its graph multi_stream "
                   "gains, and eager per-op host costs × host_scale from its eager layer times"}
        for key in EAGER_HOST_KEYS:
            doc["host"][key]["source"] += f"; × {host_scale:.3f} layer-level host scale"
        for fig in doc["host"]["launch_by_family_us"].values():
            fig["source"] += f"; × {host_scale:.3f} layer-level host scale"
        doc["measurements"] = files
        profile = Profile.model_validate(doc)
    if replay_lengths is not None:
        profile = with_first_fork(profile, resolve(replay_lengths), say, holdout_presets)
    if decode is not None:
        profile = fit_decode(profile, resolve(decode), say, holdout_presets)
    return profile


def with_first_fork(profile: Profile, run: Path, say: Progress, holdout_presets: Sequence[str] = ()) -> Profile:
    """``profile`` with ``host.graph_first_fork_us`` measured by the replay-length run ``run`` on its GPU (the run's
    environment record names it, else InputError), ``holdout_presets``' points left out."""
    records, env = load_replay_lengths(run)
    if env.get("device_name") != profile.hardware.gpu:
        raise InputError(f"--replay-lengths {run}: measured on {env.get('device_name') or 'an unnamed GPU'}, not on "
                         f"{profile.hardware.gpu}")
    say(f"the first fork of a multi-stream replay from {len(records)} replay-length records")
    doc = json.loads(profile.model_dump_json())
    path = replay_length_file(run)
    doc["host"]["graph_first_fork_us"] = first_fork_figure(records, _rel(path), holdout_presets)
    doc["measurements"] = [*doc["measurements"], _rel(path)]
    return Profile.model_validate(doc)


def with_host_costs(profile: Profile, run: Path, holdout_presets: Sequence[str], holdout_tokens: Sequence[int],
                     files: list[str], say: Progress) -> Profile:
    """``profile`` with its eager host costs measured in ``run`` (``calibration.fit_host``, calibration split)."""
    path = find_file(run, "cases.json", "kernels_real")
    cases = [c for c in load_cases(run, eager_rerun=False) if c.get("mode") == "eager"]
    calib = [c for c in cases if split_of(c, holdout_presets, holdout_tokens) == "calibration"]
    say(f"eager host costs per torch op from {len(calib)} calibration cases of {_rel(run)}")
    try:
        fitted = fit_host_costs(calib, profile, _rel(path))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    report = fitted.pop("report")
    doc = json.loads(profile.model_dump_json())
    doc["host"].update(fitted)
    idle = fit_idle_launch(calib, Profile.model_validate(doc), _rel(path))
    if idle is None:
        say("no host-bound calibration case with timed steady calls: launches onto an idle stream cost nothing extra")
    doc["host"]["idle_launch_us"] = idle
    doc["fit"]["layer"] = {
        "eager_cases": _rel(run), "eager_host": report, "holdout_presets": list(holdout_presets),
        "holdout_tokens": list(holdout_tokens),
        "how": "calibration split only (the held-out presets and token counts never enter a fit): per-op families "
               "from its eager traces, the sharing model's layer term from its graph multi_stream gains; eager "
               f"host costs per torch op measured profiler-free in {_rel(run)}, and the extra cost of a launch "
               "onto an idle stream from its host-bound cases' event-timed calls; its eager cases are validated"}
    doc["measurements"] = [*files, _rel(path)]
    return Profile.model_validate(doc)


def graph_corun_records(path: Path, holdout_presets: Sequence[str] = ()) -> tuple[list[dict[str, Any]], str]:
    """The graph co-run configurations stored at ``path``, those of the held-out presets (and their rank
    variants) left out; and where they come from, for a figure's source."""
    if not path.exists():
        raise InputError(f"{path}: no such file (python -m calibration.microbench.graph_corun writes it)")
    held = {get_preset(p).name for p in holdout_presets}
    records = [r for r in load_records(path) if split_rank_name(get_preset(r["preset"]).name)[0] not in held]
    return records, f"{_rel(path)}, {len(records)} configurations" + (
        f" (presets held out: {sorted(held)})" if held else "")


def graph_join_figure(records: Sequence[dict[str, Any]], where: str) -> dict[str, Any]:
    """``host.graph_join_us`` as the graph co-runs ``records`` measure it, with its source: the pooled median of an
    empty and a one-kernel fork/join added to the routed chain."""
    join = graph_join_us(records)
    return _fig(join["median_us"],
                f"measured ({where}): a fork/join's cost inside a replayed graph, pooled "
                f"median of RG+fj0 - RG (empty aux branch, median {join['empty_median_us']:.2f}"
                f" µs) and RG+fj1 - RG (one tiny aux kernel, {join['tiny_median_us']:.2f} µs)"
                f" over the {join['n']} configurations with a routed chain of at most "
                f"{SHORT_CHAIN_US:.0f} µs (p10 {join['p10_us']:.2f}, p90 {join['p90_us']:.2f})")


def fit_decode(profile: Profile, folder: Path, say: Progress, holdout_presets: Sequence[str] = ()) -> Profile:
    """The graph fork/join cost (``host.graph_join_us``) and the sharing form fitted on the decode-regime
    co-runs inside graphs (``calibration.fit_graph_corun``: fitted on the R / G pairs, chosen on the held-out
    S|RG pairs, no layer-level gain in any fit); the latency-bound kernels' slowdown under HBM load, measured in
    situ where the folder has layer traces and the eager traces of their points
    (``calibration.fit_latency_in_situ``), with the grouped GEMM's shard law from the same layer traces
    (``calibration.fit_grouped_law``), else from the placement probe's runs, and from its router runs the
    warps an SM runs at full speed
    (``calibration.fit_latency``); the GEMM launches recorded on this GPU (``calibration.fit_geometry``); then
    the decisions it makes on the folder's bench runs, and those of the trace
    what-if on its decode sets (``calibration.fit_whatif``)."""
    path = folder / "graph_corun" / "graph_corun.json.gz"
    records, where = graph_corun_records(path, holdout_presets)
    doc = json.loads(profile.model_dump_json())
    doc["host"]["graph_join_us"] = graph_join_figure(records, where)
    profile = Profile.model_validate(doc)
    say(f"fitting the sharing forms on {len(records)} graph co-run configurations")
    pieces = [pieces_of(r, profile) for r in records]
    eager = {form: entry.get("params", {}) for form, entry in (profile.fit.get("interference") or {}).items()
             if isinstance(entry, dict) and form in FORMS}
    forms = compare_forms(pieces, profile.host_costs("eager"), eager)
    chosen = forms["chosen"]
    held = forms["comparison"][chosen]["held_out_overlap_error_points"]
    carried = {k: v for k, v in eager.get(chosen, {}).items() if k not in FORMS[chosen][1]}
    units = {k: v + "; fitted on the graph co-runs' R/G pairs" for k, v in FORM_UNITS[chosen].items()
             if k in forms["params"] and k not in carried}
    units |= {k: FORM_UNITS[chosen].get(k, k) + "; not identified by the graph co-runs (none is bound by it): "
              "from the eager co-run fit (microbench_corun, co-run pairs only)" for k in carried}
    doc["interference"] = {
        "form": chosen, "params": forms["params"], "units": units,
        "source": f"fitted to the decode-regime co-runs inside CUDA graphs ({where}): every form fitted on the "
                  f"pairs of the routing chain and the routed experts with the shared experts (both orders, "
                  f"staggered), chosen on the held-out S|RG pairs (median |overlap error| {held['median_abs']:.2f} "
                  f"points); no layer-level gain enters the fit"}
    doc["fit"]["interference_graph"] = forms["comparison"]
    doc["measurements"] = [*doc["measurements"], _rel(path)]
    probe = folder / "placement_probe"
    layer_traces, eager_traces = folder / "layer_traces", folder / "eager_traces"
    if (layer_traces / "kernels.json.gz").is_file() and (eager_traces / "traces").is_dir():
        say("reading the routing chain's slowdown under HBM load from the layer traces (in situ)")
        doc["memory_latency"] = memory_latency_in_situ(layer_traces, eager_traces,
                                                       f"{_rel(layer_traces)}, {_rel(eager_traces)}",
                                                       holdout_presets, profile)
        doc["measurements"] += [_rel(layer_traces / "kernels.json.gz"), _rel(eager_traces / "traces")]
        say("fitting the grouped GEMM's shard law on the layer traces' grouped kernels")
        doc["grouped_shard_law"] = grouped_shard_law(layer_traces, _rel(layer_traces), profile, holdout_presets)
    elif all((probe / f"placement_probe_{op}.json.gz").is_file() for op in LATENCY_OPS):
        say("reading the latency-bound kernels' slowdown under HBM load from the placement probe")
        doc["memory_latency"] = memory_latency(probe, profile.hbm_bytes_per_us, _rel(probe))
        doc["measurements"] += [_rel(probe / f"placement_probe_{op}.json.gz") for op in LATENCY_OPS]
    if all((probe / run).is_file() for run in ROUTER_RUNS):
        say("reading the warps an SM runs at full speed from the placement probe's packed router GEMMs")
        doc["issue_warps"] = issue_warps(probe, _rel(probe))
        doc["issue_warps_by_kernel"] = issue_warps_by_kernel(probe, _rel(probe))
        doc["measurements"] += [_rel(probe / run) for run in ROUTER_RUNS]
    sources = geometry_sources(folder)
    if sources:
        say("reading the GEMM launches recorded on this GPU (kernel and launch geometry)")
        doc["launch_geometry"] = launch_geometries(sources, ", ".join(_rel(s) for s in sources))
    profile = Profile.model_validate(doc)
    runs = bench_runs(folder)
    if runs:
        say("scoring the decisions on the decode bench runs")
        doc["fit"]["decisions"] = decisions_report(profile, runs)
        doc["measurements"] += [_rel(r / "cases.json") for r in runs]
        profile = Profile.model_validate(doc)
    decode = decode_sets(folder)
    if decode:
        say("scoring the trace what-if's decisions on the decode sets (eager traces beside layout means)")
        whatif = whatif_decisions_report(profile, decode, _rel)
        if whatif is not None:
            doc["fit"]["whatif_decisions"] = whatif
            doc["measurements"] += [f"{s[key]}/{leaf}" for s in whatif["sets"]
                                    for key, leaf in (("traces", "traces"), ("reference", "cases.json"))]
            profile = Profile.model_validate(doc)
    return profile


def bench_runs(folder: Path) -> list[Path]:
    """The bench runs directly under ``folder`` (``*/cases.json``), less the layout A/A runs of
    ``kernels_real.layout_probe`` (records with ``weights_copy``): those are scored apart
    (``benchmarks/layout_spread.py``)."""
    return sorted(p.parent for p in folder.glob("*/cases.json")
                  if not any("weights_copy" in case for case in load_cases(p.parent, eager_rerun=False)))


def decisions_report(profile: Profile, runs: Sequence[Path], margin: float = 0.005) -> dict[str, Any]:
    """The regret of the profile's multi_stream choices over the graph cases of ``runs`` (``simulator.decisions``)."""
    points = gain_points(profile, runs)
    scores = score(points, margin)
    return {"runs": [_rel(r) for r in runs], "margin": margin, "points": len(points),
            "scores": [s.to_json_dict() for s in scores], "verdict": verdict(scores)}
