"""``moesim whatif trace KINETO.json --aux-module PATH | --aux-region NAME``: replay a real PyTorch profiler trace
and predict what moving module calls or a ``record_function`` region to an aux stream would give."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.cli.common import number_in
from simulator.errors import InputError

if TYPE_CHECKING:
    from simulator.kineto.replay import WhatIf


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("whatif", help="what-if analyses of real traces",
                              description="What-if analyses of what really ran.")
    inner = p.add_subparsers(dest="whatif_command", metavar="KIND", required=True)
    t = inner.add_parser(
        "trace", help="replay a Kineto trace and move a module call or record_function range to an aux stream",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Replay a Kineto / Chrome trace (torch.profiler JSON, optionally .gz) through the simulator "
                    "and predict the span of GPU work\nwhen the kernels launched inside every selected module "
                    "call (--aux-module) or record_function range (--aux-region) run on an\naux stream (event "
                    "fork where it starts, join on the main stream before the next kernel outside it). Kernel "
                    "durations\nand host timing come from the trace; added host calls and graph-replay costs from the "
                    "profile; overlapping kernels share\nthe GPU by block placement from the traced launch geometry "
                    "(--sharing).",
        epilog="vLLM workflow (no code changes: its torch profiler records with_stack, so module calls are in "
               "the trace):\n"
               "  1. serve with the torch profiler on (v0.13+: --profiler-config '{\"profiler\": \"torch\", "
               "\"torch_profiler_dir\": \"/abs/dir\"}';\n"
               "     older: VLLM_TORCH_PROFILER_DIR=/abs/dir) and --enforce-eager for an eager trace; send a "
               "few requests between\n     start_profile and stop_profile (vllm bench serve --profile does it)\n"
               "  2. moesim whatif trace DIR/TRACE.json.gz --list-modules          # the module tree: pick a path\n"
               "  3. moesim whatif trace DIR/TRACE.json.gz --aux-module DeepseekV2MoE/DeepseekV2MLP \\\n"
               "       --measured-us US     # the traced span's time measured without the profiler, if known\n"
               "  For CUDA graphs, trace the same steps eagerly and once with graphs: the eager trace as TRACE, "
               "--launch graph,\n  --durations-from GRAPH_TRACE (a graph trace alone: --aux-kernels by position, "
               "see --list-modules).\n"
               "  DP attention + EP: give every rank's trace (R0.json.gz R1.json.gz ...): collectives (NCCL, "
               "DeepEP, custom all-reduce)\n  are waits for the slowest rank, the step is the slowest rank's span. "
               "--serialize-aux asks the reverse of a\n  multi-stream trace (what switching the overlap off "
               "gives).\n"
               "  The figures: the traced span, its replay (baseline, vs the trace) and the what-if's span, per "
               "layer call when the\n  trace says how many it holds; gain = 1 - what-if / baseline.")
    t.add_argument("trace", nargs="+", help="Kineto trace JSON (.json or .json.gz); several: one per rank (vLLM "
                                            "writes one per rank), replayed together aligned at their collectives")
    t.add_argument("--aux-region", metavar="NAME", help="record_function range to move to aux")
    t.add_argument("--aux-module", metavar="PATH",
                   help="module calls to move to aux: '/'-separated class names matched as a suffix of the "
                        "module nesting, instance numbers ignored (e.g. DeepseekV2MoE/DeepseekV2MLP: the "
                        "shared experts, not the dense layers' MLP)")
    t.add_argument("--join-after", metavar="NAME2",
                   help="join on main after the last kernel of the next NAME2 range (default: before the first "
                        "later kernel outside the moved call's siblings)")
    t.add_argument("--join-after-module", metavar="PATH2",
                   help="join on main after the last kernel of the next PATH2 module call (e.g. "
                        "DeepseekV2MoE/FusedMoE: after the routed experts)")
    t.add_argument("--aux-kernels", metavar="A-B[,C-D]",
                   help="a CUDA-graph trace alone (no module calls): the GPU ops at these positions of every "
                        "period of the trace's op sequence (a replayed step; --list-modules prints it) go to aux")
    t.add_argument("--join-after-kernel", metavar="J[,K]",
                   help="with --aux-kernels: main waits after position J of the period, one per run (default, "
                        "one run: before the period's last op)")
    t.add_argument("--serialize-aux", action="store_true",
                   help="the reverse question, for a multi-stream trace: every stream's GPU work on the main "
                        "stream in host order (what switching the overlap off would give)")
    t.add_argument("--list-modules", action="store_true",
                   help="list the module class paths (calls, GPU ops, GPU time) and ranges of the trace, and exit")
    t.add_argument("--launch", choices=("as-traced", "graph"), default="as-traced",
                   help="as-traced: keep the traced host timing; graph: one graph replay of the same kernels")
    t.add_argument("--profile", metavar="P", help="profile name or JSON path (default: the shipped profile "
                                                   "matching the traced GPU, calibrated first)")
    t.add_argument("--measured-us", type=number_in(1e-3, 1e9), metavar="US",
                   help="as-traced: the traced code's time measured WITHOUT the profiler (per layer call when the "
                        "trace's moesim_layers_per_trace says it holds several, else for the whole traced span); "
                        "the traced host time between submissions is scaled so the baseline replay lasts that "
                        "long (a profiler slows the host, not the kernels; the factor is reported)")
    t.add_argument("--durations-from", metavar="TRACE",
                   help="take kernel durations from another trace of the same kernel sequence, mapped by "
                        "position (e.g. the CUDA-graph run's trace for --launch graph)")
    t.add_argument("--device", type=int, help="GPU to replay (default: the one with the most GPU work)")
    t.add_argument("--thread", type=int, help="host thread id to replay (default: the busiest launcher)")
    t.add_argument("--sharing", choices=("placement", "profile"), default="placement",
                   help="how overlapping kernels share the GPU: placement (default), block placement from the traced "
                        "GEMM kernels' grids and occupancy (their blocks wait for free SMs, or are packed where they "
                        "land and stay: the decode regime's router GEMM beside the shared experts), the other kernels "
                        "slowed by the profile's measured memory latency under load; profile, the profile's fitted "
                        "co-run form (the default until 2026-12-03; calibration/VALIDATION.md compares the two)")
    t.add_argument("--json", action="store_true", help="print machine-readable JSON")
    t.add_argument("--trace-out", metavar="F",
                   help="write the predicted (what-if) timeline as Perfetto JSON, on the trace's clock")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.kineto.replay import list_modules, run_whatif, selectors
    from simulator.outputs import check_outputs, dumps, write_json_atomic

    if len(args.trace) > 1:
        return _ranks(args)
    args.trace = args.trace[0]
    if args.list_modules:
        from simulator.kineto.select import render_listing

        listing = list_modules(args.trace, args.profile, args.device, args.thread)
        print(dumps(listing) if args.json else render_listing(listing))
        return 0
    what = selectors(args.aux_region, args.aux_module, args.join_after, args.join_after_module)[0]
    if what is None and not args.serialize_aux and args.aux_kernels is None:
        raise InputError("say what to move: --aux-module PATH (module classes, e.g. DeepseekV2MoE/DeepseekV2MLP; "
                         "--list-modules shows them), --aux-region NAME (a record_function range) or "
                         "--serialize-aux (the reverse)")
    profile_file = args.profile if args.profile is not None and Path(args.profile).is_file() else None
    check_outputs({"--trace-out": args.trace_out}, [args.trace, args.durations_from, profile_file])
    report = run_whatif(args.trace, args.aux_region, join_after=args.join_after, module=args.aux_module,
                        join_after_module=args.join_after_module, launch=args.launch,
                        profile=args.profile, device=args.device, thread=args.thread,
                        durations_from=args.durations_from, measured_layer_us=args.measured_us,
                        serialize_aux=args.serialize_aux, aux_kernels=args.aux_kernels,
                        join_after_kernel=args.join_after_kernel, sharing=args.sharing)
    if args.trace_out:
        write_json_atomic(args.trace_out, _timeline(report))
    if args.json:
        print(dumps(report.to_json_dict()))
        return 0
    _print(report, args)
    return 0


def _ranks(args: argparse.Namespace) -> int:
    from simulator.kineto.ranks import run_ranks
    from simulator.outputs import dumps

    given = [flag for flag, value in (("--durations-from", args.durations_from), ("--measured-us", args.measured_us),
                                      ("--aux-kernels", args.aux_kernels), ("--trace-out", args.trace_out),
                                      ("--list-modules", args.list_modules), ("--device", args.device),
                                      ("--thread", args.thread)) if value not in (None, False)]
    if given:
        raise InputError(f"{', '.join(given)}: one trace at a time (not with several ranks)")
    out = run_ranks(args.trace, args.aux_region, module=args.aux_module, join_after=args.join_after,
                    join_after_module=args.join_after_module, serialize_aux=args.serialize_aux, launch=args.launch,
                    profile=args.profile, sharing=args.sharing)
    if args.json:
        print(dumps(out))
        return 0
    print(f"{len(out['ranks'])} ranks aligned at {out['collectives']} collectives (--launch {out['launch']})")
    for n, row in enumerate(out["ranks"]):
        whatif = "" if row["whatif_us"] is None else f"   what-if {row['whatif_us']:12.3f} µs"
        print(f"  rank {n}: baseline {row['baseline_us']:12.3f} µs{whatif}   (traced {row['measured_us']:.3f} µs; "
              f"clock {row['clock_offset_us']:+.3f} µs; {row['trace']})")
    step = "" if out["step_whatif_us"] is None else \
        f"   what-if {out['step_whatif_us']:12.3f} µs (gain {out['step_gain']:+.2%})"
    print(f"  step (slowest rank): baseline {out['step_baseline_us']:12.3f} µs{step}")
    print(f"  profile: {out['profile']}")
    print(f"  note: {out['note']}")
    return 0


def _timeline(report: WhatIf) -> dict:
    from simulator.perfetto import to_chrome_trace

    result = report.whatif or report.baseline
    doc = to_chrome_trace(result, f"whatif {report.region}")
    origin = report.host.origin_us
    for event in doc["traceEvents"]:
        if "ts" in event:
            event["ts"] += origin
    return doc


def _print(report: WhatIf, args: argparse.Namespace) -> None:
    d = report.to_json_dict()
    print(f"trace {args.trace}: {d['kernels']} GPU ops replayed on device {d['device']}, thread {d['thread']} "
          f"(--launch {report.launch})")
    per_layer = report.layers > 1
    print(f"  measured span of GPU work   {d['measured_us']:12.3f} µs  (from the trace)")
    print(f"  baseline replay             {d['baseline_us']:12.3f} µs  ({d['baseline_error']:+.2%} vs measured"
          + (f"; {d['baseline_per_layer_us']:.3f} µs per layer)" if per_layer else ")"))
    if d["whatif_us"] is not None:
        label = report.region if report.serialized else f"{report.region} on aux"
        print(f"  what-if ({label})  {d['whatif_us']:12.3f} µs  (gain {d['gain']:+.2%}; "
              f"{report.moved} kernels moved in {report.instances} "
              + ("calls" if report.what is not None and report.what.kind == "module" else
                 "streams" if report.serialized else "periods" if report.kernels else "ranges")
              + (f"; {d['whatif_per_layer_us']:.3f} µs per layer)" if per_layer else ")"))
    print(f"  sources: {d['sources']['durations']}; host: {d['sources']['host']}; added host calls: "
          f"{d['sources']['added_host_calls']}; sharing: {d['sources']['sharing']}")
    print(f"  profile: {d['profile']}")
    for note in report.notes:
        print(f"  note: {note}")
    for warning in report.host.warnings:
        print(f"  warning: {warning}")
    if args.trace_out:
        from simulator.outputs import written

        print(written("predicted timeline", args.trace_out, "open in ui.perfetto.dev next to the trace"))
