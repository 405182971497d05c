"""Platform detection, the lazy ``current_stream()`` helper and the per-micro-batch event pairs.

Only ``torch.cuda.Stream`` / ``torch.cuda.Event`` / ``torch.cuda.set_stream`` / ``wait_stream`` /
``wait_event`` / ``record`` are used: HIP builds of torch provide the same names (ROCm was not run here).
"""

from __future__ import annotations

import threading

import torch

MICRO_BATCHES = 2  # DBO: two micro-batches, one event pair each


def platform_info(device: torch.device | None = None) -> dict[str, object]:
    """Which torch build and accelerator run here (``backend``: cuda, hip or cpu)."""
    info: dict[str, object] = {
        "torch": torch.__version__,
        "cuda_version": torch.version.cuda,
        "hip_version": torch.version.hip,
        "rocm_tested": False,
    }
    on_gpu = torch.cuda.is_available() and (device is None or device.type == "cuda")
    if not on_gpu:
        info["backend"] = "cpu"
        return info
    info["backend"] = "hip" if torch.version.hip else "cuda"
    props = torch.cuda.get_device_properties(device)
    info.update(
        device_name=props.name,
        capability=list(torch.cuda.get_device_capability(device)),
        sm_count=props.multi_processor_count,
        total_memory_bytes=props.total_memory,
        l2_cache_bytes=getattr(props, "L2_cache_size", None),
    )
    return info


class EventPair:
    """``input_ready``: recorded on main, waited by aux; ``output_ready``: recorded on aux, waited by main."""

    def __init__(self) -> None:
        self.input_ready = torch.cuda.Event()
        self.output_ready = torch.cuda.Event()


def make_event_pairs(n: int = MICRO_BATCHES) -> list[EventPair]:
    """One event pair per micro-batch index, created once (reused across forwards and graph captures)."""
    return [EventPair() for _ in range(n)]


_local = threading.local()


def current_stream(*, safe: bool = True) -> torch.cuda.Stream:
    """The thread's dedicated stream, switched to lazily on first call (as vLLM's ``current_stream()``).

    ``safe=True`` (the seed-003 fix): the new stream first waits on the stream it replaces, so work already
    queued there (e.g. the writes of the routing input) happens before anything issued on the new one.
    ``safe=False`` reproduces the bug: the two streams are unordered (a race the CUDA sanitizer reports).
    """
    stream = getattr(_local, "stream", None)
    if stream is None:
        previous = torch.cuda.current_stream()
        stream = torch.cuda.Stream()
        if safe:
            stream.wait_stream(previous)
        _local.previous = previous
        _local.stream = stream
        torch.cuda.set_stream(stream)
    return stream


def reset_current_stream() -> None:
    """Undo ``current_stream()``'s switch: the thread's previous stream is current again."""
    previous = getattr(_local, "previous", None)
    if previous is not None:
        torch.cuda.set_stream(previous)
    _local.stream = None
    _local.previous = None
