#!/usr/bin/env bash
# One GPU call of the calibration session: GPU tests, the microbenchmarks and/or the kernels_real sweep.
# Usage (on the device machine, repo root): bash calibration/gpu_session.sh {tests+micro|sweep|eager|all} OUTDIR
# Writes OUTDIR/<part>/... and OUTDIR/<part>.log; packs everything into OUTDIR/results-<parts>.tgz.
set -u
parts=${1:-all}
out=${2:?output folder}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/nvidia-smi.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)'
if [[ $parts == *tests* || $parts == all ]]; then
  python3 -m pytest -q -m gpu tests/test_kernels_real_gpu.py tests/test_microbench_gpu.py -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.log" | tail -5
fi
if [[ $parts == *micro* || $parts == all ]]; then
  python3 -m calibration.microbench --out "$out/microbench" 2>&1 | tee "$out/microbench.log" | tail -40
fi
if [[ $parts == *sweep* || $parts == all ]]; then
  python3 -m kernels_real.bench --out "$out/kernels_real" 2>&1 | tee "$out/sweep.log" | tail -40
fi
if [[ $parts == *eager* ]]; then
  # eager strategies timed in alternation, the process pinned to one core (host-bound timings drift otherwise)
  taskset -c 2 python3 -m kernels_real.bench --out "$out/kernels_real_eager" --modes eager --interleave-eager \
    --trace-presets 2>&1 | tee "$out/sweep-eager.log" | tail -80
fi
tar czf "$out/results-${parts//+/-}.tgz" -C "$out" --exclude='*.tgz' .
ls -la "$out"
