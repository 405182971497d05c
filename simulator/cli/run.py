"""``moesim run SCENARIO.yaml``: which shared-expert schedule wins for this model, platform, parallelism and
load, and by how much (per MoE layer and per decode step)."""

from __future__ import annotations

import argparse

from simulator.evaluate import Evaluation, evaluate, trace_document
from simulator.outputs import dumps, invocation, write_json_atomic
from simulator.scenario import load_scenario


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="evaluate a scenario: MoE-layer time, decode-step time (TPOT) and gain per strategy",
        description="Simulate one decode step of the scenario's model under each strategy (sequential, "
                    "multi_stream, fused_shared; DBO off/on): the MoE block and the other blocks of a layer "
                    "are captured and replayed as graphs, then composed into the step. Figures come from the "
                    "scenario's profile (calibrated or datasheet: every output says which).")
    p.add_argument("scenario", help="scenario YAML (see scenarios/; moesim schema prints its JSON schema)")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--trace-out", metavar="F",
                   help="write a Perfetto/Chrome trace JSON: one decoder layer per strategy (one process each)")
    p.add_argument("--html", metavar="F", help="write the design-review page of this scenario (offline HTML)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    evaluation = evaluate(scenario, args.scenario)
    if args.trace_out:
        write_json_atomic(args.trace_out, trace_document(evaluation))
    if args.html:
        from simulator.report.build import write_scenarios_report

        write_scenarios_report([(args.scenario, scenario)], args.html, invocation(), progress=not args.json)
    if args.json:
        print(dumps(evaluation.to_json_dict()))
        return 0
    print_table(evaluation)
    if args.trace_out:
        print(f"trace written to {args.trace_out} (open in ui.perfetto.dev)")
    if args.html:
        print(f"report written to {args.html}")
    return 0


def describe_case(evaluation: Evaluation) -> str:
    c = evaluation.case
    return (f"{c.dims.name} ({c.dims.layers} layers, {c.dims.moe_layers} MoE), TP{c.par.tp} DP{c.par.dp} "
            f"EP{c.par.ep}, {c.tokens} tokens/rank ({c.tokens_group} into the MoE), KV length {c.kv_len}")


def print_table(evaluation: Evaluation) -> None:
    parts = evaluation.step_parts
    print(f"scenario {evaluation.scenario}: {describe_case(evaluation)}")
    print(f"profile: {evaluation.profile.describe()}")
    print(f"link (collectives): {evaluation.case.platform.describe_link()}")
    print(f"per layer: attention block {parts['attention_block']:.1f} µs, dense MLP {parts['dense_mlp_block']:.1f} "
          f"µs; per step: head {parts['head']:.1f} µs, graph launch {parts['graph_launch']:.1f} µs")
    if evaluation.profile.provenance == "calibrated":
        print("  (MoE block: costed as the layer in calibration/VALIDATION.md, measured tables and per-op families "
              "of the profile; attention, dense MLP and head: its fitted gemm / elementwise families, no measured "
              "attention kernel)")
    print(f"  {'strategy':<22}{'MoE layer µs':>14}{'step (TPOT) ms':>16}{'gain vs sequential':>20}")
    for r in evaluation.results:
        name = r.strategy + (" + dbo" if r.dbo else "")
        if r.moe_layer_us is None or r.step_us is None or r.gain_vs_sequential is None:
            print(f"  {name:<22}{'—':>14}{'—':>16}{'—':>20}   ({r.note})")
            continue
        note = f"   ({r.note})" if r.note else ""
        print(f"  {name:<22}{r.moe_layer_us:>14.1f}{r.step_us / 1000:>16.3f}{r.gain_vs_sequential:>+20.2%}{note}")
