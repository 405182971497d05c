"""Multi-GPU variants of the MoE layer (TP; DP-attention + EP) and their benchmarks, on torch.distributed.

One process per GPU under ``torchrun`` (NCCL; RCCL on ROCm builds, same backend name), or CPU processes with
gloo for tests. Multi-GPU runs were not made here (see kernels_real/distributed/README.md).
"""
