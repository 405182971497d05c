"""Workload builders: programs (stream-program IR) for MoE layers and the kernels they run."""
