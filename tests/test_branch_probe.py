"""``calibration.microbench.branch_probe``: without a CUDA GPU it refuses in one line (exit code 2); on one, a
short run writes stamps in order (the branch starts after the fork, ends after it starts, S ends after the fork)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest


def test_refuses_without_a_cuda_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() and torch.version.hip is None:
        pytest.skip("a CUDA GPU is present: the GPU test below runs the probe")
    from calibration.microbench.branch_probe import main

    assert main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: needs a CUDA GPU") and err.count("\n") == 1
    assert not (tmp_path / "branch_probe.json.gz").exists()


@pytest.mark.gpu
def test_a_short_run_writes_ordered_stamps(tmp_path: Path) -> None:
    from calibration.microbench.branch_probe import main

    assert main(["--out", str(tmp_path), "--routers", "deepseek_v3", "--tokens", "2", "--budget-s", "3"]) == 0
    payload = json.loads(gzip.decompress((tmp_path / "branch_probe.json.gz").read_bytes()))
    assert payload["records"]
    for record in payload["records"]:
        both = record["stamps_us"]["S|R"]
        assert 0 < both["R start"] < both["R end"] and both["S end"] > 0
        alone = record["stamps_us"]["R"]
        assert alone["R end"] > alone["R start"] >= 0
