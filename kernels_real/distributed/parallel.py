"""Process-group set-up: one process per GPU (NCCL / RCCL) or per CPU worker (gloo); world size 1 works too.

NVLink multicast stays off, as the device machines require: ``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1`` are forced before the group is created.
Works under ``torchrun`` (it sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*) and in a plain single process
(defaults to rank 0 of 1 on a free local port).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist

from kernels_real.config import ConfigError

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class Dist:
    """This process's place in the group."""

    rank: int
    world: int
    local_rank: int
    device: torch.device
    backend: str  # "nccl" (RCCL on ROCm builds) or "gloo"

    @property
    def on_gpu(self) -> bool:
        return self.device.type == "cuda"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(device: str | None = None, timeout_s: float = 300.0) -> Dist:
    """Join (or create) the default process group; ``device``: ``cuda``, ``cpu`` or None (cuda if visible).

    Reads the torchrun environment; without it, a group of one on this host.
    """
    os.environ.update(MULTICAST_OFF)  # forced, whatever the caller's environment says
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    kind = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(f"local rank {local_rank} but only {torch.cuda.device_count()} GPU(s) visible")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        backend = "nccl"
    else:
        dev, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        import datetime as dt

        kwargs = {"device_id": dev} if kind == "cuda" else {}
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=dt.timedelta(seconds=timeout_s), **kwargs)
    return Dist(rank, world, local_rank, dev, backend)


def shutdown() -> None:
    """Destroy the default group if one exists (after a barrier, so no rank leaves early)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def shard(n: int, rank: int, world: int, what: str) -> slice:
    """The contiguous ``rank``-th of ``world`` equal parts of ``range(n)``; ConfigError if it does not split."""
    if n % world:
        raise ConfigError(f"{what} = {n} does not split over {world} ranks")
    size = n // world
    return slice(rank * size, (rank + 1) * size)
