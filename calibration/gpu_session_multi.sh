#!/usr/bin/env bash
# The multi-GPU calibration session (one call on a machine with >= 2 GPUs; NVLink multicast kept off).
# Usage (repo root): bash calibration/gpu_session_multi.sh OUTDIR
#   1. the distributed CPU tests (gloo) and the NCCL numerics + graph-replay check on all GPUs;
#   2. bench_collectives and bench_layers on 2 GPUs, and on all of them when there are more than 2; DP+EP
#      with the exact dispatch (eager) on 2 GPUs;
#   3. packs OUTDIR/results-multi.tgz. The GPU image has no pydantic, so the fit runs back here:
#      python -m calibration.fit_comm OUTDIR/collectives-w*/collectives.json --profile h200 --out NEW.json
# Budget: about 9 minutes on 2 GPUs (layers sweep capped by --budget-s; cases past it are listed as skipped).
set -u
out=${1:?output folder}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/nvidia-smi.txt"
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip, "nccl", torch.cuda.nccl.version())'
echo "GPUs: $ngpu; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
if (( ngpu < 2 )); then
  echo "needs >= 2 GPUs, found $ngpu" >&2
  exit 2
fi
worlds=2
(( ngpu > 2 )) && worlds="2 $ngpu"
layers_budget=$(( ngpu > 2 ? 130 : 240 ))
python3 -m pytest -q tests/test_distributed_layers.py tests/test_distributed_benches.py -p no:cacheprovider 2>&1 | tee "$out/tests.log" | tail -3
torchrun --standalone --nproc-per-node "$ngpu" -m kernels_real.distributed.check 2>&1 | tee "$out/check.log" | tail -40
for w in $worlds; do
  torchrun --standalone --nproc-per-node "$w" -m kernels_real.distributed.bench_collectives --out "$out/collectives-w$w" \
    2>&1 | tee "$out/collectives-w$w.log" | tail -50
  torchrun --standalone --nproc-per-node "$w" -m kernels_real.distributed.bench_layers --out "$out/layers-w$w" \
    --budget-s "$layers_budget" 2>&1 | tee "$out/layers-w$w.log" | tail -70
done
# DP+EP with the exact (host-synced) dispatch, eager only: what the padded dispatch's extra bytes cost
torchrun --standalone --nproc-per-node 2 -m kernels_real.distributed.bench_layers --out "$out/layers-w2-exact" \
  --parallel dp_ep --dispatch exact --modes eager --budget-s 60 2>&1 | tee "$out/layers-w2-exact.log" | tail -40
tar czf "$out/results-multi.tgz" -C "$out" --exclude='*.tgz' .
ls -la "$out"
