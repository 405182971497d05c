"""``moesim run SCENARIO.yaml``: which shared-expert schedule wins for this model, platform, parallelism and
load, and by how much (per MoE layer and per decode step)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simulator.cli.common import add_scenario_options, profile_input, warn

if TYPE_CHECKING:
    from simulator.evaluate import Evaluation, StrategyResult


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run", help="evaluate a scenario: MoE-layer time, decode-step time (TPOT) and gain per strategy",
        description="Simulate one decode step of the scenario's model under each strategy (sequential, "
                    "multi_stream, fused_shared; DBO off/on): the MoE block and the other blocks of a layer "
                    "are captured and replayed as graphs, then composed into the step. Figures come from the "
                    "scenario's profile (calibrated or datasheet: every output says which).")
    p.add_argument("scenario", help="scenario YAML (see scenarios/; moesim schema prints its JSON schema)")
    add_scenario_options(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.add_argument("--trace-out", metavar="F",
                   help="write a Perfetto/Chrome trace JSON: one decoder layer per strategy (one process each)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.cli.common import load_with_overrides, scenario_warnings
    from simulator.evaluate import evaluate, trace_document
    from simulator.outputs import (
        MAX_RESULT_US,
        check_finite,
        check_outputs,
        dumps,
        invocation,
        write_json_atomic,
        written,
    )

    scenario, overridden = load_with_overrides(args)
    check_outputs({"--trace-out": args.trace_out, "--html": args.html}, [args.scenario, profile_input(args.profile)])
    warnings = scenario_warnings(scenario)
    warn("run", warnings)
    evaluation = evaluate(scenario, args.scenario)
    check_finite(evaluation.to_json_dict(), limit=MAX_RESULT_US)
    trace = trace_document(evaluation) if args.trace_out else None
    if args.json:
        print(dumps({**evaluation.to_json_dict(), "warnings": warnings}))
    else:
        print_table(evaluation, overridden)
    if trace is not None:
        write_json_atomic(args.trace_out, trace)
    if args.html:
        from simulator.report.build import write_scenarios_report

        write_scenarios_report([(args.scenario, scenario)], args.html, invocation(), progress=not args.json)
    if not args.json:
        if args.trace_out:
            print(written("trace", args.trace_out, "open in ui.perfetto.dev"))
        if args.html:
            print(written("report", args.html))
    return 0


def describe_case(evaluation: Evaluation) -> str:
    c = evaluation.case
    return (f"{c.dims.name} ({c.dims.layers} layers, {c.dims.moe_layers} MoE), TP{c.par.tp} DP{c.par.dp} "
            f"EP{c.par.ep}, {c.tokens} tokens/rank ({c.tokens_group} into the MoE), KV length {c.kv_len}")


def strategy_name(r: StrategyResult) -> str:
    return r.strategy + (" + dbo" if r.dbo else "")


def winner_line(evaluation: Evaluation) -> str:
    """The fastest strategy and by how much it beats sequential and the runner-up."""
    ranked = sorted(((r.step_us, r) for r in evaluation.results if r.step_us is not None), key=lambda x: x[0])
    if not ranked:
        return "fastest: none (no strategy applies)"
    best_us, best = ranked[0]
    line = f"fastest: {strategy_name(best)}, step {best_us / 1000:.3f} ms"
    if strategy_name(best) != "sequential" and best.gain_vs_sequential is not None:
        line += f", {best.gain_vs_sequential:+.2%} vs sequential"
    if len(ranked) > 1:
        runner_us, runner = ranked[1]
        line += (f", {(runner_us - best_us) / runner_us:.2%} ({(runner_us - best_us) / 1000:.3f} ms per step) "
                 f"ahead of the runner-up {strategy_name(runner)}")
    return line


def print_table(evaluation: Evaluation, overridden: str = "") -> None:
    parts = evaluation.step_parts
    print(f"scenario {evaluation.scenario}: {describe_case(evaluation)}")
    if overridden:
        print(f"overridden: {overridden}")
    print(f"profile: {evaluation.profile.describe()}")
    print(f"link (collectives): {evaluation.case.platform.describe_link()}")
    print(f"per layer: attention block {parts['attention_block']:.1f} µs, dense MLP {parts['dense_mlp_block']:.1f} "
          f"µs; per step: head {parts['head']:.1f} µs, graph launch {parts['graph_launch']:.1f} µs"
          + (f", a multi-stream step's first fork {parts['first_fork']:.1f} µs" if parts["first_fork"] else ""))
    if evaluation.profile.provenance == "calibrated":
        print("  (MoE block: costed as the layer in calibration/VALIDATION.md, measured tables and per-op families "
              "of the profile; attention, dense MLP and head: its fitted gemm / elementwise families, no measured "
              "attention kernel)")
    print(f"  {'strategy':<22}{'MoE layer µs':>14}{'step (TPOT) ms':>16}{'gain vs sequential':>20}")
    for r in evaluation.results:
        name = strategy_name(r)
        if r.moe_layer_us is None or r.step_us is None or r.gain_vs_sequential is None:
            print(f"  {name:<22}{'—':>14}{'—':>16}{'—':>20}   ({r.note})")
            continue
        note = f"   ({r.note})" if r.note else ""
        print(f"  {name:<22}{r.moe_layer_us:>14.1f}{r.step_us / 1000:>16.3f}{r.gain_vs_sequential:>+20.2%}{note}")
    print(winner_line(evaluation))
