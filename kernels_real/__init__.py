"""The real torch dual-stream MoE layer (CUDA; HIP-compatible APIs, ROCm not run here) and its benchmark.

Never imported by ``simulator/``. See kernels_real/README.md.
"""
