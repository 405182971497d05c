"""One profiler session as the benches take it: ``fn`` run inside ``torch.profiler`` (CPU activity, plus CUDA
and ``cuda_sync`` records on a GPU: which event each stream wait waited on), metadata added as ``moesim_*``
keys, the Chrome trace returned as JSON bytes. Only ``torch.cuda`` / profiler APIs HIP builds provide."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

try:  # cuda_sync records (stream waits with their event); absent from some builds
    from torch._C._profiler import _ExperimentalConfig
except ImportError:  # pragma: no cover - depends on the torch build
    _ExperimentalConfig = None


def chrome_trace(fn: Callable[[], None], gpu: bool, meta: dict[str, object] | None = None,
                 **options: Any) -> bytes:
    """The exported Chrome trace of one call of ``fn``; ``options`` go to ``torch.profiler.profile``
    (``record_shapes``, ``with_stack``, ``with_modules``)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    if gpu:
        torch.cuda.synchronize()
        if _ExperimentalConfig is not None:
            options["experimental_config"] = _ExperimentalConfig(enable_cuda_sync_events=True)
    with profile(activities=activities, **options) as prof:
        fn()
        if gpu:
            torch.cuda.synchronize()
        for key, value in (meta or {}).items():
            prof.add_metadata_json(f"moesim_{key}", json.dumps(value))
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        return Path(tmp).read_bytes()
    finally:
        os.unlink(tmp)
