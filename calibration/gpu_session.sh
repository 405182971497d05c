#!/usr/bin/env bash
# One GPU call of the calibration session: GPU tests, the microbenchmarks and/or the kernels_real sweep.
# Usage (on the device machine, repo root): bash calibration/gpu_session.sh PARTS OUTDIR
# PARTS: parts joined by '+' (tests, micro, corun, sweep, eager, eager2, probe, traced, traced2, traced3,
# graphprobe, decode, ranks, layertraces, placement, branch, dispatch, grouped, groupedcontext, routing, layout, layoutmeans, eagertraces,
# hostcosts, geometry, replaylengths, groupedplaced),
# or all (= tests+micro+sweep).
# Writes OUTDIR/<part>/... and OUTDIR/<part>.log; packs everything into OUTDIR/results-<parts>.tgz.
set -u
parts=${1:-all}
out=${2:?output folder}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/nvidia-smi.txt"
# the presets and rank variants of the layer-trace matrices (calls 19 and 24): the layout means and eager traces
LAYER_POINTS="deepseek_v3 deepseek_v3@tp2 llama4_scout llama4_scout@tp2 llama4_scout@tp4 qwen2_57b_a14b deepseek_v2_lite
  deepseek_v2_lite@tp2 deepseek_v2_lite@tp4 deepseek_v3@tp4 deepseek_v3@tp8 deepseek_v3@ep8 llama4_scout@tp8
  llama4_scout@ep8 qwen2_57b_a14b@tp2 qwen2_57b_a14b@tp4 qwen2_57b_a14b@tp8 kimi_k2"
has() { [[ $parts == all && $1 =~ ^(tests|micro|sweep)$ ]] || [[ "+$parts+" == *"+$1+"* ]]; }
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)'
if has tests; then
  python3 -m pytest -q -m gpu tests/test_kernels_real_gpu.py tests/test_microbench_gpu.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.log" | tail -5
fi
if has corun; then
  # co-run pairs only (the routing kernels beside small-M shared GEMMs and grouped GEMMs, both start orders)
  python3 -m pytest -q -m gpu tests/test_microbench_gpu.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests-corun.log" | tail -3
  python3 -m calibration.microbench --out "$out/microbench_corun" --only corun --budget-s 120 2>&1 \
    | tee "$out/microbench-corun.log" | tail -30
fi
if has micro; then
  python3 -m calibration.microbench --out "$out/microbench" 2>&1 | tee "$out/microbench.log" | tail -40
fi
if has sweep; then
  python3 -m kernels_real.bench --out "$out/kernels_real" 2>&1 | tee "$out/sweep.log" | tail -40
fi
if has eager; then
  # all eager cases of each preset interleaved (tokens x strategies), pinned to one core (host-bound times drift); no traces
  taskset -c 2 python3 -m kernels_real.bench --out "$out/kernels_real_eager" --modes eager --interleave-eager \
    --trace-presets 2>&1 | tee "$out/sweep-eager.log" | tail -80
fi
if has eager2; then
  # all eager cases of each preset interleaved (tokens x strategies, shuffled once), pinned to one core; eager
  # traces of 3 back-to-back warmed layer calls (moesim_layers_per_trace: 3); --modes eager: no graph traces
  taskset -c 2 python3 -m kernels_real.bench --out "$out/kernels_real_eager2" --modes eager --interleave-eager \
    --trace-presets deepseek_v3 qwen2_57b_a14b deepseek_v2_lite --trace-tokens 1 16 128 1024 \
    2>&1 | tee "$out/sweep-eager2.log" | tail -80
fi
if has hostcosts; then
  # every eager case of the six presets interleaved and pinned (as eager2), with each burst followed in the same
  # round by the case's host-only time behind a busy GPU and one clocked call per torch op (moesim calibrate
  # --eager-host reads it); no traces
  taskset -c 2 python3 -m kernels_real.bench --out "$out/host_costs" --modes eager --interleave-eager --host-costs \
    --trace-presets --budget-s 480 2>&1 | tee "$out/hostcosts.log" | tail -40
fi
if has probe; then
  # where the eager multi-stream layer's extra time goes (layer variants; host cost per op on one vs two streams)
  taskset -c 2 python3 -m kernels_real.eager_probe --out "$out/eager_probe" 2>&1 | tee "$out/eager-probe.log" | tail -60
fi
if has traced; then
  # the three traced presets at the traced token counts, timed (graph; eager interleaved, pinned, one burst length
  # per token count) and traced in the same call: traces with cuda_sync records, eager traces of 3 layer calls,
  # graph traces of 5 replays (call 6 ran this as part "sweep3", before bursts were equalised)
  taskset -c 2 python3 -m kernels_real.bench --out "$out/kernels_real_traced" --interleave-eager \
    --presets deepseek_v3 qwen2_57b_a14b deepseek_v2_lite --tokens 1 16 128 1024 --graph-trace-replays 5 \
    --trace-presets deepseek_v3 qwen2_57b_a14b deepseek_v2_lite --trace-tokens 1 16 128 1024 \
    2>&1 | tee "$out/traced.log" | tail -60
fi
traced_per_preset() {
  # as traced, but each graph trace is of the graph instance that was timed (traced at the end of its preset's
  # timing), one preset per process (no profiler session before another preset's timing), merged into $1
  for preset in deepseek_v3 qwen2_57b_a14b deepseek_v2_lite; do
    taskset -c 2 python3 -m kernels_real.bench --out "$out/$1/$preset" --interleave-eager \
      --presets "$preset" --tokens 1 16 128 1024 --graph-trace-replays 5 --trace-timed-graphs \
      --trace-presets "$preset" --trace-tokens 1 16 128 1024 2>&1 | tee -a "$out/$2.log" | tail -14
  done
  python3 -m calibration.merge_bench_runs "$out/$1"
}
if has traced2; then
  traced_per_preset kernels_real5 traced2
fi
if has traced3; then
  # traced2 with eager statistics per weight set (and one eager trace call per set), run twice (the second
  # run measures the spread between runs) into $TRACED3_DIR (default kernels_real6) and ${TRACED3_DIR}_repeat
  dir=${TRACED3_DIR:-kernels_real6}
  traced_per_preset "$dir" traced3
  traced_per_preset "${dir}_repeat" traced3
fi
if has decode; then
  # the decode regime: the layer and its rank variants (one GPU doing one TP / EP rank's compute) at 1..256
  # tokens, graph mode, sequential vs multi_stream (validation data); then the pieces' co-runs inside graphs
  variants=""
  for p in deepseek_v3 qwen2_57b_a14b llama4_scout deepseek_v2_lite; do variants+=" $p $p@tp2 $p@tp4 $p@tp8 $p@ep8"; done
  python3 -m kernels_real.bench --out "$out/${RANKS_DIR:-kernels_real9}" --modes graph --strategies sequential multi_stream \
    --interleave-graph \
    --presets $variants --tokens 1 2 4 8 16 32 64 128 256 --trace-presets --budget-s "${RANKS_BUDGET_S:-250}" \
    2>&1 | tee "$out/ranks.log" | tail -70
  python3 -m calibration.microbench.graph_corun --out "$out/graph_corun" --budget-s "${CORUN_BUDGET_S:-200}" \
    2>&1 | tee "$out/graph-corun.log" | tail -90
fi
if has ranks; then
  # the decode matrix of other presets (RANKS_PRESETS, each with RANKS_VARIANTS, default @tp2 @tp4 @tp8 @ep8) at
  # 1..256 tokens, graph mode, sequential vs multi_stream timed interleaved, no traces, into RANKS_DIR
  variants=""
  for p in ${RANKS_PRESETS:?RANKS_PRESETS: the presets}; do
    variants+=" $p"; for v in ${RANKS_VARIANTS:-tp2 tp4 tp8 ep8}; do variants+=" $p@$v"; done
  done
  python3 -m kernels_real.bench --out "$out/${RANKS_DIR:-ranks}" --modes graph --strategies sequential multi_stream \
    --interleave-graph --presets $variants --tokens 1 2 4 8 16 32 64 128 256 --trace-presets \
    --budget-s "${RANKS_BUDGET_S:-200}" 2>&1 | tee "$out/ranks.log" | tail -70
fi
if has layertraces; then
  # the layer at the small-token regime where the model misses (llama4_scout and its TP ranks; deepseek_v3 and
  # its TP2 rank; qwen2), timed interleaved, each graph traced after its preset's timing on the instance that was
  # timed (3 back-to-back replays), one preset per process; kernels.json keeps start times and occupancy
  # (LAYER_PRESETS: another preset list, e.g. a held-out set; LAYER_DIR: its folder name; LAYER_TOKENS: other token
  # counts, e.g. "64 128 256")
  ldir=${LAYER_DIR:-layer_traces}
  ltokens=${LAYER_TOKENS:-1 2 4 16}
  for preset in ${LAYER_PRESETS:-llama4_scout llama4_scout@tp2 llama4_scout@tp4 deepseek_v3 deepseek_v3@tp2 qwen2_57b_a14b}; do
    python3 -m kernels_real.bench --out "$out/$ldir/$preset" --modes graph \
      --strategies sequential multi_stream --interleave-graph --presets "$preset" --tokens $ltokens \
      --trace-presets "$preset" --trace-tokens $ltokens --graph-trace-replays 3 --trace-timed-graphs \
      --budget-s "${LAYER_BUDGET_S:-40}" 2>&1 | tee -a "$out/layertraces.log" | tail -10
  done
  python3 -m calibration.merge_bench_runs "$out/$ldir"
fi
if has placement; then
  # the fp32 router GEMM beside shared-expert GEMMs whose grids leave more or fewer SMs free, inside graphs
  python3 -m calibration.microbench.placement_probe --out "$out/placement" --budget-s "${PLACEMENT_BUDGET_S:-150}" \
    2>&1 | tee "$out/placement.log" | tail -90
fi
if has branch; then
  # when the routing branch starts and ends beside a shared GEMM inside a graph: %globaltimer stamps, no profiler
  python3 -m calibration.microbench.branch_probe --out "$out/branch" 2>&1 | tee "$out/branch.log" | tail -40
fi
if has dispatch; then
  # where a router stand-in's blocks land beside a shared GEMM (%smid, %globaltimer), with and without a spin (call 48)
  python3 -m calibration.microbench.dispatch_probe --out "$out/dispatch_probe" 2>&1 | tee "$out/dispatch.log" | tail -3
  python3 benchmarks/dispatch_table.py "$out/dispatch_probe" | tee -a "$out/dispatch.log"
fi
if has grouped; then
  # the grouped GEMMs alone, in the layer's expert layout and the old one (calls 45-46), and the layer's own call (47)
  python3 -m calibration.microbench --out "$out/microbench_grouped_ab" --only grouped --grouped-ab --budget-s 480 \
    2>&1 | tee "$out/grouped.log" | tail -5
  python3 -m kernels_real.grouped_probe --out "$out/grouped_probe" 2>&1 | tee -a "$out/grouped.log" | tail -12
fi
if has groupedcontext; then
  # the layer's grouped GEMM after seven kinds of kernel: why the layer ran it faster than the microbench (sessions 29-30)
  python3 -m pytest -q -m gpu tests/test_grouped_context_probe.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests-groupedcontext.log" | tail -3
  python3 -m kernels_real.grouped_context_probe --out "$out/grouped_context_probe" \
    --presets llama4_scout qwen2_57b_a14b deepseek_v3 llama4_scout@tp4 --tokens 1 2 4 2>&1 | tee "$out/groupedcontext.log" | tail -16
fi
if has routing; then
  # the experts every weight set's router hits, for every preset and rank variant measured (call 44; no timing)
  python3 -m kernels_real.routing_counts --out "$out/routing" --presets $(python3 -c 'import json, pathlib
print(" ".join(sorted({c["preset"] for f in pathlib.Path("calibration/measurements").rglob("cases.json")
                       for c in json.loads(f.read_text()) if isinstance(c, dict) and "preset" in c})))') \
    2>&1 | tee "$out/routing.log" | tail -2
fi
if has layout; then
  # A/A: the same layer graphs captured twice, on two copies of the weights (same values, other addresses),
  # all timed interleaved and traced once each (kernels kept, no raw traces); DeepSeek-V3 with 2 weight sets
  python3 -m kernels_real.layout_probe --out "$out/layout_probe" --weight-sets 3 --tokens 1 2 4 \
    --presets ${LAYOUT_PRESETS:-llama4_scout llama4_scout@ep8 qwen2_57b_a14b@tp8 deepseek_v3@tp4} 2>&1 | tee "$out/layout.log" | tail -20
  python3 -m kernels_real.layout_probe --out "$out/layout_probe_v3" --weight-sets 2 --tokens 1 2 4 \
    --presets deepseek_v3 2>&1 | tee "$out/layout-v3.log" | tail -8
fi
if has layoutmeans; then
  # (POINT_TOKENS: other token counts than 1 2 4 16, for layoutmeans and eagertraces)
  # the layer-trace matrices (calls 19 and 24) timed again over four layouts each (two weight copies × two
  # captures, or one copy × four captures where two do not fit), timing only, one preset per process; stops
  # starting presets after LAYOUT_BUDGET_S seconds
  ldir="$out/layout_means"
  for preset in ${LAYOUT_PRESETS:-$LAYER_POINTS}; do
    if (( SECONDS > ${LAYOUT_BUDGET_S:-480} )); then echo "skipped $preset: budget" | tee -a "$out/layoutmeans.log"; continue; fi
    python3 -m kernels_real.layout_probe --out "$ldir/$preset" --no-trace --tokens ${POINT_TOKENS:-1 2 4 16} --presets "$preset" \
      2>&1 | tee -a "$out/layoutmeans.log" | tail -6
  done
  python3 - "$ldir" <<'PY'
import json, pathlib, sys
run = pathlib.Path(sys.argv[1])
parts = sorted(p for p in run.iterdir() if (p / "cases.json").is_file())
(run / "cases.json").write_text(json.dumps([c for p in parts for c in json.loads((p / "cases.json").read_text())], indent=1) + "\n")
for p in parts:
    (run / "per_preset" / p.name).mkdir(parents=True, exist_ok=True)
    (p / "env.json").rename(run / "per_preset" / p.name / "env.json")
    (p / "cases.json").unlink()
    p.rmdir()
PY
fi
if has eagertraces; then
  # the user's path of the trace what-if: sequential eager traces (record_shapes: every kernel's operator and
  # input shapes) of the layout-means points (calls 19, 24, 28) at 1/2/4/16 tokens, not timed, one preset per
  # process, merged into eager_traces/
  edir="$out/eager_traces"
  for preset in ${EAGER_PRESETS:-$LAYER_POINTS}; do
    python3 -m kernels_real.bench --out "$edir/$preset" --trace-only --modes eager --strategies sequential \
      --presets "$preset" --tokens ${POINT_TOKENS:-1 2 4 16} --trace-presets "$preset" --trace-tokens ${POINT_TOKENS:-1 2 4 16} \
      2>&1 | tee -a "$out/eagertraces.log" | tail -3
  done
  python3 -m calibration.merge_bench_runs "$edir"
fi
if has geometry; then
  # the kernel and launch geometry the libraries pick for every GEMM of the layer (shared experts', router's, grouped),
  # every preset and rank variant at 1..256 tokens, inside replayed graphs; no time (GEOMETRY_PRESETS: fewer)
  python3 -m pytest -q -m gpu tests/test_geometry_probe_gpu.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests-geometry.log" | tail -3
  python3 -m kernels_real.geometry_probe --out "$out/geometry_probe" ${GEOMETRY_PRESETS:+--presets $GEOMETRY_PRESETS} \
    2>&1 | tee "$out/geometry.log" | tail -8
fi
if has replaylengths; then
  # graphs of N = W, 2W, 4W layer calls, N varied: what a replay pays once (multi_stream: its first fork) and per
  # layer (session 31; REPLAY_PRESETS / REPLAY_TOKENS: other points)
  python3 -m pytest -q -m gpu tests/test_replay_length_probe.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests-replaylengths.log" | tail -3
  python3 -m kernels_real.replay_length_probe --out "$out/replay_lengths" --budget-s ${REPLAY_BUDGET_S:-300} \
    --presets ${REPLAY_PRESETS:-deepseek_v3@tp8 qwen2_57b_a14b glm45_air@tp8 deepseek_v3@tp2 deepseek_v2_lite \
      llama4_scout@tp4 qwen2_57b_a14b@tp4 glm45_air@tp4 qwen15_moe_a27b@tp2 deepseek_v3@ep8 qwen3_30b_a3b \
      deepseek_v2_lite@tp4 kimi_k2@tp8} --tokens ${REPLAY_TOKENS:-1 2 4} 2>&1 | tee "$out/replaylengths.log" | tail -45
fi
if has groupedplaced; then
  # the grouped GEMM shapes, each timed over four placements of its input rows (session 30's protocol)
  python3 -m calibration.microbench --out "$out/microbench_grouped_placed" --only grouped --budget-s ${GROUPED_BUDGET_S:-70} \
    2>&1 | tee "$out/groupedplaced.log" | tail -5
fi
if has graphprobe; then
  # graph replays timed plain, while profiled (their traces kept), plain again; eager traces of the same cases
  python3 -m kernels_real.graph_probe --out "$out/graph_probe" 2>&1 | tee "$out/graph-probe.log" | tail -24
fi
tar czf "/tmp/results-${parts//+/-}.tgz" -C "$out" . && mv "/tmp/results-${parts//+/-}.tgz" "$out/"
ls -la "$out"
