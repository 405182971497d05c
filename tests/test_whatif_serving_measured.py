"""The module-selection what-if against serving-shaped fixtures measured on a GPU
(``calibration/measurements/<gpu>/<date>/serving_fixture/``, written by ``python -m kernels_real.serving_fixture``:
eager and CUDA-graph traces of the same forward calls recorded as vLLM records them, and the forward times
measured with CUDA events in the same run). Skipped where no such folder is committed.

Graph: the sequential eager trace replayed as one graph (``--launch graph``) with the sequential graph trace's
kernel durations, shared experts moved by module path, against the measured multi-stream graph forward (issue
16's target for graph what-ifs: median within 2 %, worst within 5 %; each folder holds one case, held to 2 %).
The reverse: the multi-stream eager trace with its aux stream serialized, against the measured sequential graph
forward, within 5 % (its overlapped kernels keep their slowed durations: it reads high).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.kineto.replay import run_whatif

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "calibration" / "measurements").glob("*/*/serving_fixture/fixture.json"))
SHARED = "DeepseekV2MoE/DeepseekV2MLP"


def _case(path: Path) -> tuple[Path, dict]:
    record = json.loads(path.read_text())
    if not record.get("measured_forward_us") or "graph" not in record.get("modes", ()):
        pytest.skip(f"{path}: no GPU measurements (a CPU run)")
    return path.parent, record


@pytest.mark.skipif(not FIXTURES, reason="no measured serving_fixture folder under calibration/measurements")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.parent.name)
def test_graph_whatif_within_five_percent_of_measured_multi_stream(path: Path) -> None:
    folder, record = _case(path)
    measured = record["measured_forward_us"]["multi_stream_graph"]["median_us"]
    report = run_whatif(folder / record["traces"]["sequential_eager"], None, module=SHARED, launch="graph",
                        durations_from=folder / record["traces"]["sequential_graph"], progress=False)
    assert report.instances == record["moe_layers"] * record["steps_per_trace"]
    assert report.whatif_layer_us == pytest.approx(measured, rel=0.02)


@pytest.mark.skipif(not FIXTURES, reason="no measured serving_fixture folder under calibration/measurements")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.parent.parent.name)
def test_serialized_aux_within_five_percent_of_measured_sequential(path: Path) -> None:
    folder, record = _case(path)
    measured = record["measured_forward_us"]["sequential_graph"]["median_us"]
    report = run_whatif(folder / record["traces"]["multi_stream_eager"], None, serialize_aux=True, launch="graph",
                        durations_from=folder / record["traces"]["multi_stream_graph"], progress=False)
    assert report.whatif_layer_us == pytest.approx(measured, rel=0.05)
