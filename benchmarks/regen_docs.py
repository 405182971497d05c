"""Rewrite the generated blocks of the evidence documents from the commands that measure them.

    python benchmarks/regen_docs.py            # rewrite every block (after any change to the model or the data)
    python benchmarks/regen_docs.py --check    # exit 1, with a diff, where a document differs from its commands
    python benchmarks/regen_docs.py --only ID [ID ...] | --print ID | --list

A block is ``<!-- BEGIN GENERATED: ID (COMMAND) -->`` … ``<!-- END GENERATED -->`` in ``calibration/VALIDATION.md``,
``docs/validation.md`` or ``docs/whatif_accuracy.md``; COMMAND prints the block's body (``--print ID`` where it is
a table this script assembles). Every block runs on the CPU: the GPU runs it shows are read from the committed
measurements. Text outside the blocks is never touched.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import decode_step_tables as dst  # noqa: E402
import heldout_sets as hs  # noqa: E402
import whatif_accuracy as wa  # noqa: E402

BLOCK = re.compile(r"<!-- BEGIN GENERATED: (?P<id>[\w.-]+) \((?P<cmd>[^\n]*)\) -->\n"
                   r"(?P<body>.*?)<!-- END GENERATED -->", re.S)
VALIDATION, DECODE, WHATIF = "calibration/VALIDATION.md", "docs/validation.md", "docs/whatif_accuracy.md"
MEASUREMENTS = ROOT / "calibration" / "measurements" / "h200" / "2026-12-02"
SELF = "python benchmarks/regen_docs.py --print "
F_RUNS = ("kernels_real6", "kernels_real6_repeat", "kernels_real7", "kernels_real7_repeat", "kernels_real8",
          "kernels_real8_repeat")
EARLIER = (("C", ()),)


@dataclass(frozen=True)
class Block:
    doc: str
    command: str
    make: Callable[[], str]
    slow: bool = False  # minutes: checked only with the full set (tests/test_docs_generated.py)


def _moesim_text(*args: str) -> str:
    cmd = [sys.executable, "-c", "import sys; from simulator.cli.main import main; sys.exit(main())", *args]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"moesim {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


@cache
def _whatif(runs: tuple[str, ...], profile: str = "h200", with_sanity: bool = True) -> list[dict]:
    return wa.results_for(MEASUREMENTS, list(runs) or None, profile, with_sanity=with_sanity)


def _whatif_cmd(runs: tuple[str, ...], profile: str = "h200", with_sanity: bool = True) -> str:
    return ("python benchmarks/whatif_accuracy.py" + "".join(f" --run {r}" for r in runs) + f" --profile {profile}"
            + ("" if with_sanity else " --no-sanity"))


def _whatif_block(runs: tuple[str, ...], profile: str = "h200", with_sanity: bool = True) -> Block:
    return Block(WHATIF, _whatif_cmd(runs, profile, with_sanity),
                 lambda: wa.render(MEASUREMENTS, _whatif(runs, profile, with_sanity)))


def _targets_f() -> str:
    results = _whatif(F_RUNS)
    return wa.targets_table([("F pooled (6 runs)", results[-1])] + [(r["run"], r) for r in results[:-1]])


def _targets_earlier() -> str:
    return wa.targets_table([(name, _whatif(runs)[0]) for name, runs in EARLIER])


def _profile():  # -> simulator.profile.Profile (imported lazily)
    from simulator.profile import load_profile

    return load_profile("h200")


def _sharing() -> str:
    from simulator.validation import load_cases
    from simulator.validation_markdown import sharing_markdown

    cases = [c for c in load_cases(MEASUREMENTS) if c.get("device", "cuda") != "cpu"]
    return sharing_markdown(_profile(), cases)


def _fit() -> str:
    from simulator.validation_markdown import fit_markdown

    return fit_markdown(_profile())


DECODE_RUNS = ("calibration/measurements/h200/2026-12-03/kernels_real9",
               "calibration/measurements/h200/2026-12-03/kernels_real9_repeat")


def _shape_decisions(runs: tuple[str, ...], profile: str = "h200") -> str:
    """The shape path's choices and 1/2/4-token gains on ``runs``' measured matrix, with ``profile``."""
    import decisions as dec  # benchmarks/decisions.py (this folder is on sys.path when run as a script)

    from simulator.profile import load_profile

    return dec.markdown(dec.points_of(list(runs), profile), 0.005, load_profile(profile).describe(), list(runs)) + "\n"


def _decisions() -> str:
    return _shape_decisions(DECODE_RUNS)


HELD_OUT_START = "calibration/measurements/h200/2026-12-03/kernels_real10"
LAYER_TRACES = "calibration/measurements/h200/2026-12-03/layer_traces"
LAYER_TRACES_HELDOUT = "calibration/measurements/h200/2026-12-03/layer_traces_heldout"
LAYOUT_MEANS = "calibration/measurements/h200/2026-12-03/layout_means"
EAGER_TRACES = "calibration/measurements/h200/2026-12-03/eager_traces"
# the fresh held-out sets of calls 30-31, 32 and 33: (block prefix, eager traces, layout means, graph traces)
HELD_OUT_SETS = tuple((f"decode-heldout{n}", s.eager, s.means, s.graph) for n, s in enumerate(hs.HELD_OUT, start=2))
HELDOUT_RUNS = "calibration/heldout_runs"


# every decode set's sequential eager traces, and those of the matrix's other token counts (call 50)
MATRIX_TRACES = (EAGER_TRACES, *(s.eager for s in hs.HELD_OUT), "calibration/measurements/h200/2026-12-05/eager_traces")
DISPATCH_CALL50 = "calibration/measurements/h200/2026-12-05/dispatch_probe"


@cache
def _matrix_points() -> tuple:
    import decisions_traced as dt  # benchmarks/decisions_traced.py

    return dt.traced_points([Path(r) for r in DECODE_RUNS], [Path(f) for f in MATRIX_TRACES], _profile())


def _decisions_traced(tokens: tuple[int, ...] | None = None) -> str:
    """The matrix's decisions and its gains at 1/2/4 tokens, or (``tokens``) at those token counts beside the
    gains another machine start measured."""
    import decisions_traced as dt

    from simulator.validation import measured_gains

    runs, folders = [Path(r) for r in DECODE_RUNS], [Path(f) for f in MATRIX_TRACES]
    traced, shape = _matrix_points()
    if tokens is None:
        return dt.markdown(traced, shape, 0.005, _profile(), runs, folders) + "\n"
    other = (Path(HELD_OUT_START), measured_gains([HELD_OUT_START]))
    return dt.markdown(traced, shape, 0.005, _profile(), runs, folders, tokens, other) + "\n"


def _reproducibility() -> str:
    return _decisions_with_reference((HELD_OUT_START,), DECODE_RUNS, "h200")


def _decisions_with_reference(runs: tuple[str, ...], reference_runs: tuple[str, ...], profile: str) -> str:
    """The shape path's choices on ``runs``, beside choosing by ``reference_runs`` (the same matrix measured on
    another machine start) and that measurement's own reproducibility."""
    import decisions as dec

    from simulator.profile import load_profile

    reference = dec.reference_gains(list(reference_runs))
    points = dec.points_of(list(runs), profile, reference)
    return dec.markdown(points, 0.005, load_profile(profile).describe(), list(runs), reference,
                        list(reference_runs)) + "\n"


def _whatif_graph_eager_own(run: str, eager: str) -> str:
    """The graph traces' what-if on the points' eager traces, scored on the run's own measured gains."""
    import whatif_graph_traces as wg

    return wg.markdown(wg.points(ROOT / run, "placement", None, None, ROOT / eager), "measured gain") + "\n"


def _decisions_heldout() -> str:
    return _decisions_with_reference((LAYER_TRACES_HELDOUT,), (LAYER_TRACES_HELDOUT + "_repeat",), "h200")


def _layout_spread() -> str:
    import layout_spread as ls  # benchmarks/layout_spread.py

    return ls.markdown([ROOT / run for run in ls.DEFAULT_RUNS], "h200", 0.005) + "\n"


def _layer_overlap() -> str:
    import layer_overlap as lo  # benchmarks/layer_overlap.py

    return lo.markdown(lo.overlaps(ROOT / LAYER_TRACES, top=2)) + "\n"


def _placement() -> str:
    import placement_table as pt  # benchmarks/placement_table.py

    return pt.markdown(2) + "\n"


@cache
def _graph_points(run: str, sharing: str, reference: str | None = None) -> list:
    import whatif_graph_traces as wg  # benchmarks/whatif_graph_traces.py

    return wg.points(ROOT / run, sharing, ROOT / reference if reference else None)


def _whatif_graph_eager(runs: tuple[str, ...], reference: str, eager: str) -> str:
    """The graph traces' what-if asked on the points' eager traces with the graph durations (``--eager``)."""
    import whatif_graph_traces as wg

    found = [p for run in runs for p in wg.points(ROOT / run, "placement", ROOT / reference, None, ROOT / eager)]
    return wg.markdown(found, "measured gain (reference run)") + "\n"


def _graph_eager_cmd(runs: tuple[str, ...], reference: str, eager: str) -> str:
    return f"python benchmarks/whatif_graph_traces.py {' '.join(runs)} --reference {reference} --eager {eager}"


def _whatif_graph_traces(run: str, sharing: str = "profile", reference: str | None = None) -> str:
    import whatif_graph_traces as wg

    label = "measured gain" if reference is None else "measured gain (reference run)"
    return wg.markdown(_graph_points(run, sharing, reference), label) + "\n"


def _graph_traces_cmd(run: str, sharing: str, reference: str | None = None) -> str:
    flag = "" if sharing == "placement" else f" --sharing {sharing}"
    return f"python benchmarks/whatif_graph_traces.py {run}{flag}" + (f" --reference {reference}" if reference else "")




@cache
def _eager_points(run: str, reference: str) -> list:
    import whatif_eager_traces as we  # benchmarks/whatif_eager_traces.py

    return we.points(ROOT / run, ROOT / reference, [])


def _whatif_eager_traces(decisions: bool, run: str = EAGER_TRACES, reference: str = LAYOUT_MEANS) -> str:
    import whatif_graph_traces as wg

    found = _eager_points(run, reference)
    return (wg.decisions_markdown(found, 0.005) if decisions else
            wg.markdown(found, "measured gain (reference run)")) + "\n"


def _heldout_pooled() -> str:
    """Every decode set's eager what-if, per set and pooled, and the recorded runs of older models."""
    found, label = hs.rows(0.005, lambda s: _eager_points(s.eager, s.means))
    return hs.markdown(found, label, hs.load_recorded(ROOT / HELDOUT_RUNS)) + "\n"


def _eager_cmd(decisions: bool, run: str | None = None, reference: str | None = None) -> str:
    return ("python benchmarks/whatif_eager_traces.py" + (f" {run} --reference {reference}" if run else "")
            + (" --decisions" if decisions else ""))


def _graph_decisions(runs: tuple[str, ...], reference: str | None) -> str:
    """The graph-trace what-if over ``runs`` as a multi_stream policy, scored on ``reference``'s gains (None: each
    run's own)."""
    import whatif_graph_traces as wg

    found = [p for run in runs for p in _graph_points(run, "placement", reference)]
    return wg.decisions_markdown(found, 0.005) + "\n"


# the H100 layer traces of session 21: a GPU no profile was calibrated on (its profile: datasheet figures and the
# H200's measured quantities carried)
H100 = "calibration/measurements/h100/2026-12-05"
H100_SMALL, H100_LARGE = f"{H100}/layer_traces_small", f"{H100}/layer_traces_large"
H100_SOLO = "calibration/measurements/h100/2026-12-06/microbench"
H100_MEANS = "calibration/measurements/h100/2026-12-06/layout_means"
H100_RUNS = (H100_SMALL, H100_LARGE, f"{H100}/layer_traces_large_repeat")
# two models no device had run (session 23, on an H100): the decode matrix timed, and the layer traces at 1-16 tokens
UNSEEN = "calibration/measurements/h100/2026-12-06"
UNSEEN_RANKS, UNSEEN_TRACES = f"{UNSEEN}/ranks_unseen", f"{UNSEEN}/layer_traces_unseen"
UNSEEN_REPEAT = (f"{UNSEEN}/ranks_unseen_repeat", f"{UNSEEN}/layer_traces_unseen_repeat")  # call 2, another start
UNSEEN_EAGER = f"{UNSEEN}/eager_traces_unseen"
UNSEEN_LARGE = "calibration/measurements/h100/2026-12-07/layer_traces_unseen_large"  # 64-256 tokens, session 27


def _graph_node_gaps() -> str:
    import graph_node_gaps as gg  # benchmarks/graph_node_gaps.py

    return gg.markdown(list(gg.DEFAULT_RUNS)) + "\n"


def _time_spread() -> str:
    import time_spread as ts  # benchmarks/time_spread.py

    return ts.markdown(ts.spread([ts.parse_run(arg) for arg in ts.DEFAULT_RUNS])) + "\n"


# the eager cases of the six presets timed with one protocol (all token counts × strategies of a preset interleaved,
# 40 rounds of short bursts, pinned to one CPU) on different machine starts: the run the profile is validated
# against and the host-costs runs of session 19
EAGER_STARTS = ("eager2=calibration/measurements/h200/2026-12-02/kernels_real_eager2",
                "s19.1=calibration/measurements/h200/2026-12-05/host_costs")


def _time_spread_eager() -> str:
    import time_spread as ts  # benchmarks/time_spread.py

    return ts.markdown(ts.spread([ts.parse_run(arg) for arg in EAGER_STARTS])) + "\n"


def _eager_host_paths() -> str:
    import eager_host_paths as ehp  # benchmarks/eager_host_paths.py

    return ehp.markdown(_profile(), ehp.RUN, ehp.OTHER)


def _grouped_layouts() -> str:
    import grouped_layouts as gl  # benchmarks/grouped_layouts.py

    return gl.markdown(gl.comparisons()) + "\n"


def _dispatch_table(run: str | None = None) -> str:
    import dispatch_table as dt  # benchmarks/dispatch_table.py

    return dt.markdown(dt.load(ROOT / run if run else dt.DEFAULT_RUN)) + "\n"


def _branch_table() -> str:
    import branch_table as bt  # benchmarks/branch_table.py

    grids, probe = bt.shared_blocks(), bt.probe_forked_us()
    return "\n\n".join(bt.markdown(bt.rows(bt.load(run), grids, probe), run, table=i == 0)
                       for i, run in enumerate(bt.DEFAULT_RUNS)) + "\n"


def _spacer_table(names: tuple[str, ...] = ()) -> str:
    """``spacer_table``'s markdown of the runs ``names`` under its measurements folder (none: its default runs)."""
    import spacer_table as st  # benchmarks/spacer_table.py

    runs = [st.MEASURED / name for name in names] or list(st.DEFAULT_RUNS)
    return st.markdown(st.points([r for run in runs for r in st.load(run)]), runs) + "\n"


def _layout_spread_of(run: str) -> str:
    import layout_spread as ls

    return ls.markdown([ROOT / run], "h200", 0.005) + "\n"


def _latency_classes() -> str:
    import latency_classes as lc  # benchmarks/latency_classes.py

    runs = [ROOT / LAYER_TRACES, ROOT / LAYER_TRACES_HELDOUT]
    rows = [row for run in runs for row in lc.slowdowns(run, ROOT / EAGER_TRACES)]
    return lc.markdown(rows, _profile(), runs) + "\n"


def _packed_gemv() -> str:
    import packed_gemv as pg  # benchmarks/packed_gemv.py

    from simulator.profile import load_profile

    return pg.markdown(list(pg.DEFAULT_RUNS), load_profile("h200")) + "\n"


def _grouped_shards(runs: tuple[str, ...] = (), profile: str = "h200") -> str:
    import grouped_shards as gs  # benchmarks/grouped_shards.py

    from simulator.profile import load_profile

    return gs.markdown([ROOT / r for r in runs] or list(gs.DEFAULT_RUNS), load_profile(profile)) + "\n"


def _overlap_windows(run: str) -> str:
    import overlap_windows as ow  # benchmarks/overlap_windows.py

    return ow.markdown(ow.phase_points(ROOT / run), "placement") + "\n"




def _sharing_forms() -> str:
    """The trace what-if under each sharing form: the layer traces (call 19), the held-out ones (call 24) and the
    what-if accuracy runs F (pooled, raw predictor)."""
    import statistics

    def traces(run: str, sharing: str) -> str:
        found = _graph_points(run, sharing)
        offs = [abs(p.predicted_gain - p.measured_gain) for p in found]
        signed = [p for p in found if abs(p.measured_gain) > 0.01]
        wrong = sum((p.measured_gain > 0) != (p.predicted_gain > 0) for p in signed)
        return f"{100 * statistics.median(offs):.1f} / {100 * max(offs):.1f} | {wrong} of {len(signed)}"

    def runs_f(summary: list[dict], mode: str) -> str:
        s = next(x for x in summary if x["mode"] == mode and x["predictor"] == "raw")
        return f"{100 * s['median_err']:.2f} % / {100 * s['worst_err']:.2f} %"

    lines = ["Gain off by: median / worst over the points, in points of gain; signs counted where |measured gain| > "
             "1 %. F: the what-if's layer time against the measured multi_stream time (pooled over the six runs, "
             f"raw predictor), median / worst error. Profile {_profile().describe()}.", "",
             "| `--sharing` | layer traces (call 19): gain off | signs wrong | held-out layer traces (call 24): gain "
             "off | signs wrong | F graph | F eager |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for sharing in ("profile", "placement"):  # the F runs evaluated once per form (both modes in one pass)
        summary = wa.results_for(MEASUREMENTS, list(F_RUNS), "h200", with_sanity=False, sharing=sharing)[-1]["summary"]
        lines.append(f"| {sharing} | {traces(LAYER_TRACES, sharing)} | {traces(LAYER_TRACES_HELDOUT, sharing)} | "
                     f"{runs_f(summary, 'graph')} | {runs_f(summary, 'eager')} |")
    return "\n".join(lines) + "\n"


def _placement_op(op: str) -> str:
    import placement_table as pt

    return pt.op_markdown(op, 2, "deepseek_v3") + "\n"


def _placement_contention() -> str:
    import placement_table as pt

    return pt.contention_markdown() + "\n"


def _placement_call34() -> str:
    import placement_table as pt

    return pt.law_markdown(pt.CALL34, ("kimi_k2", "llama4_maverick")) + "\n"


def _placement_prefill(tokens: int) -> str:
    import placement_table as pt

    return pt.prefill_markdown(tokens) + "\n"


def _lopo() -> str:
    import leave_one_preset_out as lopo  # benchmarks/leave_one_preset_out.py

    return lopo.markdown(lopo.rows()) + "\n"


def _fork_order() -> str:
    import fork_order  # benchmarks/fork_order.py

    return fork_order.markdown(list(fork_order.DEFAULT_RUNS)) + "\n"


def _first_layer() -> str:
    import replay_first_layer  # benchmarks/replay_first_layer.py

    return replay_first_layer.markdown(list(replay_first_layer.DEFAULT_RUNS), []) + "\n"


def _first_fork_trial() -> str:
    import first_fork  # benchmarks/first_fork.py

    return first_fork.markdown({}, list(FIRST_FORK_TRIALS)) + "\n"


def _light_beside_gemm() -> str:
    import light_beside_gemm  # benchmarks/light_beside_gemm.py

    return light_beside_gemm.markdown() + "\n"


FIRST_FORK_TRIALS = (4.0, 8.0)  # µs: a sensitivity check of the first-fork rule until the figure is measured
GROUPED_CONTEXT_H100 = {"probe": "calibration/measurements/h100/2026-12-07/grouped_context_probe",
                        "traces": "calibration/measurements/h100/2026-12-05/layer_traces_small",
                        "microbench": "calibration/measurements/h100/2026-12-07/microbench_grouped/microbench.json.gz",
                        "placements": "calibration/measurements/h100/2026-12-07/rotation_check/rotation_check.json"}


def _grouped_context_h100() -> str:
    import grouped_context  # benchmarks/grouped_context.py

    a = {k: Path(v) for k, v in GROUPED_CONTEXT_H100.items()}
    return (grouped_context.markdown(a["probe"], a["traces"], "h100", a["microbench"]) + "\n\n"
            + grouped_context.placements_markdown(a["placements"]) + "\n")


def _h100_fork_join() -> str:
    import h100_fork_join  # benchmarks/h100_fork_join.py

    return h100_fork_join.markdown(list(h100_fork_join.DEFAULT_RUNS), h100_fork_join.GRAPH_CORUN) + "\n"


def _recorded_geometry() -> str:
    import recorded_geometry  # benchmarks/recorded_geometry.py

    return "\n\n".join(recorded_geometry.markdown(name) for name in recorded_geometry.REFERENCES) + "\n"


def _shape_geometry() -> str:
    import shape_geometry  # benchmarks/shape_geometry.py

    return shape_geometry.markdown() + "\n"


def _chip_transfer() -> str:
    import chip_transfer  # benchmarks/chip_transfer.py

    return chip_transfer.markdown() + "\n"


def _chip_transfer_solo() -> str:
    import chip_transfer  # benchmarks/chip_transfer.py

    return chip_transfer.solo_markdown(Path(H100_SOLO)) + "\n"


def _corun_forms() -> str:
    from simulator.validation_markdown import corun_forms_markdown

    return corun_forms_markdown(_profile())


def _experts_hit() -> str:
    from simulator.workloads.layout import expected_touched_experts, touched_experts
    from simulator.workloads.presets import get_preset

    d = get_preset("deepseek_v3")
    head = ("| tokens | experts hit (kernels_real's biased router) | experts hit (uniform picks) |\n"
            "| ---: | ---: | ---: |\n")
    rows = "".join(f"| {t} | {touched_experts(d, t):.1f} | {expected_touched_experts(d.n_experts, d.top_k, t):.1f} |\n"
                   for t in (1, 8, 32, 128, 256))
    return head + rows + f"\nOf {d.n_experts} routed experts (top-{d.top_k}; `simulator/workloads/layout.py`).\n"


C = dst.CONCURRENCY
MI_DP = dst.sweep_args("dsv3_mi300x_dp8", f"load.concurrency={C}")
MI_TP = dst.sweep_args("dsv3_mi300x_tp8", f"load.concurrency={C}")
MI_ATOM = dst.sweep_args("dsv3_mi300x_dp8", "load.concurrency_scope=per_dp_rank", "load.concurrency=18")
H_DP = dst.sweep_args("dsv3_h200_dp8", "load.concurrency_scope=total", f"load.concurrency={C}")
H_TP = dst.sweep_args("dsv3_h200_tp8", f"load.concurrency={C}")
H_ATOM = dst.sweep_args("dsv3_h200_dp8", "load.concurrency_scope=per_dp_rank", "load.concurrency=18")
H_ONE = dst.sweep_args("dsv3_h200_dp8", "parallelism.tp=1", "parallelism.dp=1", "parallelism.ep=1",
                       "load.concurrency_scope=total", "load.concurrency=1,2,32,256")
H_LINK_DP = dst.sweep_args("dsv3_h200_dp8", "load.concurrency_scope=total", "load.concurrency=16",
                           "platform.link_latency_us=5,25", "platform.link_bandwidth_GBps=450,150")
H_LINK_TP = dst.sweep_args("dsv3_h200_tp8", "load.concurrency=8", "platform.link_latency_us=5,25",
                           "platform.link_bandwidth_GBps=450,150")
H_DBO = dst.sweep_args("dsv3_h200_dp8", "load.concurrency_scope=total", "load.concurrency=256",
                       "strategies.dbo=[false, true]")
H_DBO_TP = dst.sweep_args("dsv3_h200_tp8", "load.concurrency=256", "strategies.dbo=[false, true]")

BLOCKS: dict[str, Block] = {
    "validate-h200": Block(VALIDATION, "moesim validate --profile h200 --markdown",
                           lambda: _moesim_text("validate", "--profile", "h200", "--markdown")),
    "validate-fit": Block(VALIDATION, SELF + "validate-fit", _fit),
    "validate-sharing": Block(VALIDATION, SELF + "validate-sharing", _sharing),
    "decode-corun-forms": Block(VALIDATION, SELF + "decode-corun-forms", _corun_forms),
    "decode-lopo": Block(VALIDATION, "python benchmarks/leave_one_preset_out.py", _lopo, slow=True),
    "decode-decisions": Block(VALIDATION, "python benchmarks/decisions.py"
                              + "".join(f" --run {r}" for r in DECODE_RUNS) + " --profile h200", _decisions),
    "decode-decisions-traced": Block(VALIDATION, "python benchmarks/decisions_traced.py"
                                     + "".join(f" --run {r}" for r in DECODE_RUNS)
                                     + "".join(f" --traces {t}" for t in MATRIX_TRACES), _decisions_traced),
    "decode-decisions-traced-large": Block(VALIDATION, "python benchmarks/decisions_traced.py"
                                           + "".join(f" --run {r}" for r in DECODE_RUNS)
                                           + "".join(f" --traces {t}" for t in MATRIX_TRACES)
                                           + f" --table-tokens 64 128 256 --other-start {HELD_OUT_START}",
                                           partial(_decisions_traced, (64, 128, 256))),
    "decode-reproducibility": Block(VALIDATION, f"python benchmarks/decisions.py --run {HELD_OUT_START}"
                                    + "".join(f" --reference-run {r}" for r in DECODE_RUNS) + " --profile h200",
                                    _reproducibility),
    "decode-decisions-heldout": Block(VALIDATION, f"python benchmarks/decisions.py --run {LAYER_TRACES_HELDOUT} "
                                      f"--reference-run {LAYER_TRACES_HELDOUT}_repeat --profile h200",
                                      _decisions_heldout),
    "decode-layout-spread": Block(VALIDATION, "python benchmarks/layout_spread.py --profile h200", _layout_spread),
    "decode-layer-overlap": Block(VALIDATION, f"python benchmarks/layer_overlap.py {LAYER_TRACES}", _layer_overlap),
    "decode-placement": Block(VALIDATION, "python benchmarks/placement_table.py --tokens 2", _placement),
    **{f"decode-placement-{op}": Block(VALIDATION, f"python benchmarks/placement_table.py --tokens 2 --op {op} "
                                       "--sized-as deepseek_v3", partial(_placement_op, op))
       for op in ("topk", "softmax", "sort", "gather")},
    "decode-placement-call34": Block(VALIDATION, "python benchmarks/placement_table.py --call34", _placement_call34),
    "decode-placement-contention": Block(VALIDATION, "python benchmarks/placement_table.py --contention",
                                         _placement_contention),
    **{f"decode-placement-prefill-{t}": Block(
        VALIDATION, f"python benchmarks/placement_table.py --prefill --tokens {t}", partial(_placement_prefill, t))
       for t in (16, 128, 1024)},
    **{f"decode-whatif-graph-traces{suffix}{form}": Block(
        VALIDATION, _graph_traces_cmd(run, sharing), partial(_whatif_graph_traces, run, sharing))
       for suffix, run in (("", LAYER_TRACES), ("-heldout", LAYER_TRACES_HELDOUT))
       for form, sharing in (("", "profile"), ("-placement", "placement"))},
    **{f"decode-whatif-graph-traces{suffix}-layout-means": Block(
        VALIDATION, _graph_traces_cmd(run, "placement", LAYOUT_MEANS),
        partial(_whatif_graph_traces, run, "placement", LAYOUT_MEANS))
       for suffix, run in (("", LAYER_TRACES), ("-heldout", LAYER_TRACES_HELDOUT))},
    **{f"decode-overlap-windows{suffix}": Block(
        VALIDATION, f"python benchmarks/overlap_windows.py {run}", partial(_overlap_windows, run))
       for suffix, run in (("", LAYER_TRACES), ("-heldout", LAYER_TRACES_HELDOUT))},
    "decode-whatif-decisions-layout-means": Block(
        VALIDATION, f"python benchmarks/whatif_graph_traces.py {LAYER_TRACES} {LAYER_TRACES_HELDOUT} --reference "
        f"{LAYOUT_MEANS} --decisions", partial(_graph_decisions, (LAYER_TRACES, LAYER_TRACES_HELDOUT), LAYOUT_MEANS)),
    "decode-whatif-graph-eager-layout-means": Block(
        VALIDATION, _graph_eager_cmd((LAYER_TRACES, LAYER_TRACES_HELDOUT), LAYOUT_MEANS, EAGER_TRACES),
        partial(_whatif_graph_eager, (LAYER_TRACES, LAYER_TRACES_HELDOUT), LAYOUT_MEANS, EAGER_TRACES)),
    **{f"{prefix}-graph-eager": Block(VALIDATION, _graph_eager_cmd((graph,), means, eager),
                                      partial(_whatif_graph_eager, (graph,), means, eager))
       for prefix, eager, means, graph in HELD_OUT_SETS if graph},
    "decode-latency-classes": Block(VALIDATION, "python benchmarks/latency_classes.py", _latency_classes),
    "decode-grouped-shards": Block(VALIDATION, "python benchmarks/grouped_shards.py", _grouped_shards),
    "decode-packed-gemv": Block(VALIDATION, "python benchmarks/packed_gemv.py", _packed_gemv),
    "transfer-h100-grouped-shards": Block(VALIDATION, f"python benchmarks/grouped_shards.py {H100_SMALL} {H100_LARGE} "
                                                      "--profile h100",
                                          lambda: _grouped_shards((H100_SMALL, H100_LARGE), "h100")),
    "decode-whatif-eager-traces": Block(VALIDATION, _eager_cmd(False), partial(_whatif_eager_traces, False)),
    "decode-whatif-eager-decisions": Block(VALIDATION, _eager_cmd(True), partial(_whatif_eager_traces, True)),
    **{f"{prefix}-eager{suffix}": Block(VALIDATION, _eager_cmd(decisions, eager, means),
                                        partial(_whatif_eager_traces, decisions, eager, means))
       for prefix, eager, means, _ in HELD_OUT_SETS for suffix, decisions in (("", False), ("-decisions", True))},
    **{f"{prefix}-graph": Block(VALIDATION, _graph_traces_cmd(graph, "placement", means),
                                partial(_whatif_graph_traces, graph, "placement", means))
       for prefix, _, means, graph in HELD_OUT_SETS if graph},
    **{f"{prefix}-graph-decisions": Block(VALIDATION, _graph_traces_cmd(graph, "placement", means) + " --decisions",
                                          partial(_graph_decisions, (graph,), means))
       for prefix, _, means, graph in HELD_OUT_SETS if graph},
    "decode-heldout-pooled": Block(VALIDATION, f"python benchmarks/heldout_sets.py --recorded {HELDOUT_RUNS}",
                                   _heldout_pooled),
    **{f"transfer-h100-whatif-{size}": Block(VALIDATION, _graph_traces_cmd(run, "placement"),
                                             partial(_whatif_graph_traces, run, "placement"))
       for size, run in (("small", H100_SMALL), ("large", H100_LARGE))},
    "transfer-h100-whatif-decisions": Block(
        VALIDATION, f"python benchmarks/whatif_graph_traces.py {H100_SMALL} {H100_LARGE} --decisions",
        partial(_graph_decisions, (H100_SMALL, H100_LARGE), None)),
    **{f"transfer-h100-shape-{profile}": Block(
        VALIDATION, "python benchmarks/decisions.py " + " ".join(f"--run {r}" for r in H100_RUNS)
        + f" --profile {profile}", partial(_shape_decisions, H100_RUNS, profile)) for profile in ("h100", "h200")},
    "unseen-h100-decisions": Block(
        VALIDATION, f"python benchmarks/decisions.py --run {UNSEEN_RANKS} --run {UNSEEN_TRACES} --profile h100",
        partial(_shape_decisions, (UNSEEN_RANKS, UNSEEN_TRACES), "h100")),
    "unseen-h100-reproducibility": Block(
        VALIDATION, "python benchmarks/decisions.py " + " ".join(f"--run {r}" for r in UNSEEN_REPEAT)
        + f" --reference-run {UNSEEN_RANKS} --reference-run {UNSEEN_TRACES} --profile h100",
        lambda: _decisions_with_reference(UNSEEN_REPEAT, (UNSEEN_RANKS, UNSEEN_TRACES), "h100")),
    "unseen-h100-whatif-eager": Block(VALIDATION, f"python benchmarks/whatif_graph_traces.py {UNSEEN_TRACES} "
                                                  f"--eager {UNSEEN_EAGER}",
                                      lambda: _whatif_graph_eager_own(UNSEEN_TRACES, UNSEEN_EAGER)),
    "unseen-h100-grouped": Block(VALIDATION, f"python benchmarks/grouped_shards.py {UNSEEN_TRACES} --profile h100",
                                 lambda: _grouped_shards((UNSEEN_TRACES,), "h100")),
    "unseen-h100-whatif": Block(VALIDATION, _graph_traces_cmd(UNSEEN_TRACES, "placement"),
                                partial(_whatif_graph_traces, UNSEEN_TRACES, "placement")),
    "unseen-h100-whatif-decisions": Block(
        VALIDATION, f"python benchmarks/whatif_graph_traces.py {UNSEEN_TRACES} --decisions",
        partial(_graph_decisions, (UNSEEN_TRACES,), None)),
    "unseen-h100-large-whatif": Block(VALIDATION, _graph_traces_cmd(UNSEEN_LARGE, "placement"),
                                      partial(_whatif_graph_traces, UNSEEN_LARGE, "placement")),
    "unseen-h100-large-whatif-decisions": Block(
        VALIDATION, f"python benchmarks/whatif_graph_traces.py {UNSEEN_LARGE} --decisions",
        partial(_graph_decisions, (UNSEEN_LARGE,), None)),
    "unseen-h100-large-shape": Block(
        VALIDATION, f"python benchmarks/decisions.py --run {UNSEEN_LARGE} --profile h100",
        partial(_shape_decisions, (UNSEEN_LARGE,), "h100")),
    "transfer-h100-whatif-layout-means": Block(VALIDATION, _graph_traces_cmd(H100_SMALL, "placement", H100_MEANS),
                                               partial(_whatif_graph_traces, H100_SMALL, "placement", H100_MEANS)),
    "transfer-h100-whatif-layout-means-decisions": Block(
        VALIDATION, _graph_traces_cmd(H100_SMALL, "placement", H100_MEANS) + " --decisions",
        partial(_graph_decisions, (H100_SMALL,), H100_MEANS)),
    "transfer-h100-shape-layout-means": Block(
        VALIDATION, f"python benchmarks/decisions.py --run {H100_MEANS} --profile h100",
        partial(_shape_decisions, (H100_MEANS,), "h100")),
    "transfer-h100-chip": Block(VALIDATION, "python benchmarks/chip_transfer.py", _chip_transfer),
    "transfer-h100-solo": Block(VALIDATION, f"python benchmarks/chip_transfer.py --solo {H100_SOLO}",
                                _chip_transfer_solo),
    "decode-shape-geometry": Block(VALIDATION, "python benchmarks/shape_geometry.py", _shape_geometry),
    "decode-recorded-geometry": Block(VALIDATION, "python benchmarks/recorded_geometry.py", _recorded_geometry),
    "decode-fork-order": Block(VALIDATION, "python benchmarks/fork_order.py", _fork_order),
    "decode-first-layer": Block(VALIDATION, "python benchmarks/replay_first_layer.py", _first_layer),
    "decode-first-fork-trial": Block(
        VALIDATION, "python benchmarks/first_fork.py --trial-us " + " ".join(f"{v:g}" for v in FIRST_FORK_TRIALS),
        _first_fork_trial),
    "decode-light-beside-gemm": Block(VALIDATION, "python benchmarks/light_beside_gemm.py", _light_beside_gemm),
    "transfer-h100-fork-join": Block(VALIDATION, "python benchmarks/h100_fork_join.py", _h100_fork_join),
    "grouped-context-h100": Block(
        VALIDATION, "python benchmarks/grouped_context.py "
        + " ".join(f"--{k} {v}" for k, v in GROUPED_CONTEXT_H100.items()) + " --profile h100", _grouped_context_h100),
    "decode-graph-node-gaps": Block(VALIDATION, "python benchmarks/graph_node_gaps.py", _graph_node_gaps),
    "time-spread": Block(VALIDATION, "python benchmarks/time_spread.py", _time_spread),
    "time-spread-eager": Block(VALIDATION, f"python benchmarks/time_spread.py {' '.join(EAGER_STARTS)}",
                               _time_spread_eager),
    "eager-host-paths": Block(VALIDATION, "python benchmarks/eager_host_paths.py", _eager_host_paths),
    "grouped-layouts": Block(VALIDATION, "python benchmarks/grouped_layouts.py", _grouped_layouts),
    "branch-stamps": Block(VALIDATION, "python benchmarks/branch_table.py", _branch_table),
    "dispatch-sms": Block(VALIDATION, "python benchmarks/dispatch_table.py", _dispatch_table),
    "dispatch-sms-call50": Block(VALIDATION, f"python benchmarks/dispatch_table.py {DISPATCH_CALL50}",
                                 partial(_dispatch_table, DISPATCH_CALL50)),
    "spacer-gains": Block(VALIDATION, "python benchmarks/spacer_table.py", _spacer_table),
    **{f"spacer-{label}": Block(VALIDATION, f"python benchmarks/spacer_table.py "
                                f"calibration/measurements/h200/2026-12-04/{run}", partial(_spacer_table, (run,)))
       for label, run in (("curve", "spacer_probe_call41"), ("order", "spacer_probe_call42"))},
    **{f"{prefix}-layout-means": Block(VALIDATION, f"python benchmarks/layout_spread.py {means} --profile h200",
                                       partial(_layout_spread_of, means))
       for prefix, _, means, _ in HELD_OUT_SETS},
    "decode-layout-means": Block(VALIDATION, f"python benchmarks/layout_spread.py {LAYOUT_MEANS} --profile h200",
                                 partial(_layout_spread_of, LAYOUT_MEANS)),
    "decode-sharing-forms": Block(VALIDATION, SELF + "decode-sharing-forms", _sharing_forms),
    "whatif-F": _whatif_block(F_RUNS),
    **{f"whatif-{name}": _whatif_block(runs) for name, runs in EARLIER},
    "whatif-datasheet-F6": _whatif_block(("kernels_real6",), "h200-datasheet", with_sanity=False),
    "whatif-targets-F": Block(WHATIF, SELF + "whatif-targets-F", _targets_f),
    "whatif-targets-earlier": Block(WHATIF, SELF + "whatif-targets-earlier", _targets_earlier),
    "experts-hit": Block(DECODE, SELF + "experts-hit", _experts_hit),
    "mi300x-dp8": Block(DECODE, dst.command(MI_DP), lambda: dst.step_table(MI_DP)),
    "mi300x-tp8": Block(DECODE, dst.command(MI_TP), lambda: dst.step_table(MI_TP)),
    "mi300x-atom": Block(DECODE, dst.command(MI_ATOM), lambda: dst.atom_line(MI_ATOM)),
    "mi300x-verdicts": Block(DECODE, SELF + "mi300x-verdicts", lambda: dst.verdicts(MI_DP, MI_TP, MI_ATOM)),
    "mi300x-thresholds": Block(DECODE, "moesim thresholds scenarios/dsv3_mi300x_dp8.yaml --json",
                               lambda: dst.thresholds_table("dsv3_mi300x_dp8")),
    "h200-crosscheck": Block(DECODE, SELF + "h200-crosscheck", lambda: dst.crosscheck(H_ONE)),
    "h200-dp8": Block(DECODE, dst.command(H_DP), lambda: dst.step_table(H_DP)),
    "h200-tp8": Block(DECODE, dst.command(H_TP), lambda: dst.step_table(H_TP)),
    "h200-atom": Block(DECODE, dst.command(H_ATOM), lambda: dst.atom_line(H_ATOM)),
    "h200-verdicts": Block(DECODE, SELF + "h200-verdicts", lambda: dst.verdicts(H_DP, H_TP, H_ATOM)),
    "h200-thresholds-dp8": Block(DECODE, "moesim thresholds scenarios/dsv3_h200_dp8.yaml --json",
                                 lambda: dst.thresholds_table("dsv3_h200_dp8")),
    "h200-thresholds-tp8": Block(DECODE, "moesim thresholds scenarios/dsv3_h200_tp8.yaml --json",
                                 lambda: dst.thresholds_table("dsv3_h200_tp8")),
    "h200-link-dp8": Block(DECODE, dst.command(H_LINK_DP), lambda: dst.strategy_table(H_LINK_DP)),
    "h200-link-tp8": Block(DECODE, dst.command(H_LINK_TP), lambda: dst.strategy_table(H_LINK_TP)),
    "h200-dbo-dp8": Block(DECODE, dst.command(H_DBO), lambda: dst.strategy_table(H_DBO)),
    "h200-dbo-tp8": Block(DECODE, dst.command(H_DBO_TP), lambda: dst.strategy_table(H_DBO_TP)),
}


def rewrite(text: str, bodies: dict[str, str], commands: dict[str, str]) -> str:
    """``text`` with the body (and the command) of every block named in ``bodies`` replaced."""
    def sub(m: re.Match[str]) -> str:
        key = m["id"]
        if key not in bodies:
            return m[0]
        return f"<!-- BEGIN GENERATED: {key} ({commands[key]}) -->\n{bodies[key]}<!-- END GENERATED -->"
    return BLOCK.sub(sub, text)


def regenerate(ids: list[str], root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """Per document touched: (current text, regenerated text). Raises on a block id no document holds or a
    document holding a block this script does not know."""
    docs = sorted({BLOCKS[i].doc for i in ids})
    out = {}
    for doc in docs:
        text = (root / doc).read_text()
        found = [m["id"] for m in BLOCK.finditer(text)]
        unknown = [i for i in found if i not in BLOCKS or BLOCKS[i].doc != doc]
        missing = [i for i in ids if BLOCKS[i].doc == doc and i not in found]
        if unknown or missing:
            raise SystemExit(f"{doc}: unknown blocks {unknown}, blocks missing {missing}")
        wanted = [i for i in found if i in ids]
        bodies = {i: _body(BLOCKS[i].make()) for i in wanted}
        out[doc] = (text, rewrite(text, bodies, {i: BLOCKS[i].command for i in wanted}))
    return out


def _body(text: str) -> str:
    return text.rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff where a document differs")
    parser.add_argument("--only", nargs="+", choices=sorted(BLOCKS), metavar="ID", help="only these blocks")
    parser.add_argument("--print", dest="show", choices=sorted(BLOCKS), metavar="ID", help="print one block's body")
    parser.add_argument("--list", action="store_true", help="list the blocks: id, document, command")
    args = parser.parse_args()
    if args.list:
        for key, b in BLOCKS.items():
            print(f"{key}\t{b.doc}\t{b.command}")
        return 0
    if args.show:
        print(_body(BLOCKS[args.show].make()), end="")
        return 0
    changed = 0
    for doc, (old, new) in regenerate(args.only or list(BLOCKS)).items():
        if old == new:
            continue
        changed += 1
        if args.check:
            diff = difflib.unified_diff(old.splitlines(True), new.splitlines(True), doc, doc + " (regenerated)")
            sys.stdout.writelines(diff)
        else:
            (ROOT / doc).write_text(new)
            print(f"rewrote {doc}")
    if args.check and changed:
        print(f"{changed} document(s) differ from their commands: run python benchmarks/regen_docs.py", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
