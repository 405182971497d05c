"""Per-preset bench outputs merged into the one-run layout the what-if accuracy benchmark reads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from calibration.merge_bench_runs import merge


def _part(run: Path, preset: str) -> None:
    part = run / preset
    (part / "traces").mkdir(parents=True)
    (part / "cases.json").write_text(json.dumps([{"preset": preset, "trace": f"traces/{preset}.json.gz"}]))
    (part / "kernels.json").write_text(json.dumps([{"preset": preset, "kernels": []}]))
    (part / "traces" / f"{preset}.json.gz").write_bytes(gzip.compress(b"{}"))
    (part / "env.json").write_text(json.dumps({"preset": preset}))
    (part / "gains.md").write_text(f"# {preset}\n")


def test_merge_concatenates_records_and_gathers_traces(tmp_path: Path) -> None:
    run = tmp_path / "kernels_real9"
    _part(run, "qwen")
    _part(run, "deepseek")
    merge(run)
    assert sorted(p.name for p in run.iterdir()) == ["cases.json", "kernels.json.gz", "per_preset", "traces"]
    cases = json.loads((run / "cases.json").read_text())
    assert [c["preset"] for c in cases] == ["deepseek", "qwen"]
    assert all((run / c["trace"]).is_file() for c in cases)
    kernels = json.loads(gzip.decompress((run / "kernels.json.gz").read_bytes()))
    assert [k["preset"] for k in kernels] == ["deepseek", "qwen"]
    assert json.loads((run / "per_preset" / "qwen" / "env.json").read_text()) == {"preset": "qwen"}
    assert (run / "per_preset" / "deepseek" / "gains.md").read_text() == "# deepseek\n"


def test_merge_refuses_a_folder_without_bench_outputs(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no <preset>/cases\.json"):
        merge(tmp_path)
