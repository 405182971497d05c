"""GPU microbenchmarks for calibrating the cost and interference models (``python -m calibration.microbench``).

Pure parts (shape lists, bytes/flops accounting, statistics, record builders, trace parsing, the summary
table) import no torch and are unit-tested on the CPU; the measuring modules import torch lazily.
"""
