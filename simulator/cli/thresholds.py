"""``moesim thresholds SCENARIO.yaml``: where multi-stream shared experts pay, as ready-to-use settings."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simulator.cli.common import add_scenario_options, profile_input, warn

if TYPE_CHECKING:
    from simulator.thresholds import Curve


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "thresholds", help="recommend multi-stream on/off, the token threshold and dp_gate",
        description="Evaluate the scenario over its thresholds.concurrency grid (knobs off, DBO off) and "
                    "recommend: enable multi-stream or not, the token threshold (the largest batch per rank at "
                    "which multi_stream beats the best alternative by thresholds.margin of the step time) and "
                    "dp_gate (from the same GPUs in the other layout, DP attention + EP vs TP + EP; not a vLLM "
                    "setting: the output says what to do with it). Figures come from the scenario's profile "
                    "(calibrated or datasheet: the output says which). Last, how far to trust them: where the "
                    "profile was calibrated, its choices scored on measured points (regret beside always / vLLM's "
                    "default / never multi_stream), and those of the trace what-if (moesim whatif trace on a "
                    "sequential trace of the model), the tool to prefer where this shape-only model loses.")
    p.add_argument("scenario", help="scenario YAML")
    add_scenario_options(p)
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from simulator.advice import dp_gate_note
    from simulator.cli.common import load_with_overrides, scenario_warnings
    from simulator.outputs import MAX_RESULT_US, check_finite, check_outputs, dumps, invocation, written
    from simulator.thresholds import recommend

    scenario, overridden = load_with_overrides(args)
    check_outputs({"--html": args.html}, [args.scenario, profile_input(args.profile)])
    largest = max(scenario.thresholds.concurrency)
    warnings = scenario_warnings(scenario.model_copy(
        update={"load": scenario.load.model_copy(update={"concurrency": largest})}))
    warn("thresholds", warnings)
    rec = recommend(scenario, args.scenario)
    check_finite(rec.to_json_dict(), limit=MAX_RESULT_US)
    if args.html:
        from simulator.report.build import write_scenarios_report

        write_scenarios_report([(args.scenario, scenario)], args.html, invocation(), progress=not args.json)
    if args.json:
        print(dumps({**rec.to_json_dict(), "dp_gate_note": dp_gate_note(rec), "warnings": warnings}))
        return 0
    print(f"scenario {rec.scenario}; profile: {rec.profile}")
    if overridden:
        print(f"overridden: {overridden}")
    print(f"link (collectives): {rec.link}")
    print(f"multi_stream wins where its step time beats the best alternative by >= {rec.margin:.2%}")
    _print_curve(rec.curve)
    if rec.other is not None:
        _print_curve(rec.other)
    print("recommended settings (" + rec.curve.layout + "):")
    for line in rec.settings():
        print(f"  {line}")
    if rec.threshold is not None and rec.curve.losses_below(rec.threshold):
        print(f"  note: below the threshold multi_stream does not win at {rec.curve.losses_below(rec.threshold)} "
              "tokens/rank")
    if rec.threshold is not None and rec.threshold == max(p.tokens for p in rec.curve.points):
        print("  note: multi_stream still wins at the largest batch evaluated; extend thresholds.concurrency to "
              "find where it stops")
    if rec.curve.fused_wins():
        print(f"  note: fused_shared is the fastest at {rec.curve.fused_wins()} of {len(rec.curve.points)} points; "
              "where the backend fuses shared experts (ROCm AITER: VLLM_ROCM_USE_AITER_FUSION_SHARED_EXPERTS=1) "
              "prefer it there")
    note = dp_gate_note(rec)
    if note:
        print(f"  note: {note}")
    print("how far to trust the threshold:")
    for line in rec.decision_lines():
        print(f"  {line}")
    if args.html:
        print(written("report", args.html))
    return 0


def _print_curve(curve: Curve) -> None:
    threshold = curve.threshold()
    print(f"{curve.layout}: token threshold {threshold if threshold is not None else 'none (disable)'}"
          f" (vs sequential only: {curve.threshold(against_best=False)})")
    print(f"  {'concurrency':>11}{'tokens/rank':>12}{'seq ms':>10}{'multi ms':>10}{'gain vs seq':>13}"
          f"{'vs best alt':>13}  best alternative")
    for p in curve.points:
        mark = "  <- wins" if p.gain_vs_best >= curve.margin else ""
        print(f"  {p.concurrency:>11}{p.tokens:>12}{p.step_us['sequential'] / 1e3:>10.3f}"
              f"{p.step_us['multi_stream'] / 1e3:>10.3f}{p.gain_vs_sequential:>+13.2%}{p.gain_vs_best:>+13.2%}"
              f"  {p.best_alternative}{mark}")
