"""The calibration section's data: a stored ``moesim validate --json`` report, or the validation of a
calibrated profile against the measurements it records; ``None`` plus the reason when there are none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.profile import Profile


def read_validation(path: str | Path) -> dict[str, Any]:
    """A ``moesim validate --json`` report from a file (one-line errors)."""
    p = Path(path)
    try:
        report = json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{p}: no such file") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{p}: malformed JSON at line {err.lineno}: {err.msg}") from None
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list):
        raise InputError(f"{p}: not a moesim validate --json report (no 'cases' list)")
    keys = ("preset", "strategy", "mode", "measured_us", "predicted_us", "error", "split")
    for i, row in enumerate(report["cases"]):
        if not isinstance(row, dict) or any(k not in row for k in keys):
            raise InputError(f"{p}: cases[{i}] lacks one of {', '.join(keys)}")
    return report


def measurements_folder(profile: Profile) -> Path | None:
    """The folder holding the ``cases.json`` the profile was fitted from, if it records one that exists."""
    from simulator.validation import find_file

    for m in profile.measurements:
        if m.endswith("cases.json"):
            folder = Path(m).parent
            folder = folder.parent if folder.name == "kernels_real" else folder
            if find_file(folder, "cases.json", "kernels_real").is_file():
                return folder
    return None


def validate_profiles(profiles: list[Profile], progress: bool = True) -> tuple[dict[str, Any] | None, str]:
    """Validate the first calibrated profile that records its measurements; else (None, why not)."""
    for profile in profiles:
        if profile.provenance != "calibrated":
            continue
        folder = measurements_folder(profile)
        if folder is None:
            continue
        return validate(profile, folder, progress), f"{profile.describe()} against {folder}"
    names = ", ".join(p.describe() for p in profiles)
    return None, (f"No validation data: no calibrated profile with stored measurements among the report's "
                  f"profiles ({names}). Run moesim validate on a calibrated profile, or pass --validation "
                  "REPORT.json (the output of moesim validate --json).")


def validate(profile: Profile, folder: Path, progress: bool = True) -> dict[str, Any]:
    """``simulator.validation.evaluate`` on the GPU cases of ``folder`` with the profile's hold-outs."""
    from tqdm import tqdm

    from simulator.validation import evaluate, load_cases, recorded_holdout

    cases = [c for c in load_cases(folder) if c.get("device", "cuda") != "cpu"]
    if not cases:
        raise InputError(f"{folder}: no GPU cases to validate against")
    with tqdm(total=len(cases), desc="validate", unit="case", disable=None if progress else True,
              leave=False) as bar:
        return evaluate(profile, cases, *recorded_holdout(profile), progress=bar.update)
