"""The GPU, driver, torch and CUDA/HIP versions, date, and clocks as read by nvidia-smi / rocm-smi."""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from typing import Any

SMI_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw", "driver_version")


def parse_smi_csv(line: str) -> dict[str, Any]:
    """One ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits`` line as a dict (numbers where
    the field is numeric)."""
    parts = [p.strip() for p in line.split(",")]
    out: dict[str, Any] = {}
    for key, val in zip(SMI_FIELDS, parts, strict=False):
        try:
            out[key] = val if key == "driver_version" else float(val)
        except ValueError:
            out[key] = val
    return out


def clocks() -> dict[str, Any] | None:
    """Current clocks, temperature, power (nvidia-smi), or rocm-smi's raw text, or None."""
    try:
        if shutil.which("nvidia-smi"):
            res = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}",
                                  "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=20, check=True)
            return parse_smi_csv(res.stdout.strip().splitlines()[0])
        if shutil.which("rocm-smi"):
            res = subprocess.run(["rocm-smi", "--showclocks", "-d", "0"], capture_output=True, text=True,
                                 timeout=20, check=True)
            return {"rocm_smi": res.stdout.strip()[-2000:]}
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return None


def collect(torch: Any, dev: Any) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(dev)
    smi = clocks()
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
        "total_memory_bytes": int(props.total_memory),
        "capability": f"{props.major}.{props.minor}",
        "driver": smi.get("driver_version") if smi else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "clocks_before": smi,
    }
