"""``whatif trace --aux-module`` / ``--join-after-module`` / ``--list-modules``: module calls selected by class path
on hand-built traces (hand-derived timelines) and on a trace torch.profiler recorded of kernels_real's
serving-shaped stack on CPU (``tests/data/kineto/serving_cpu_sequential.json.gz``, kernels added by
``synth.with_kernels``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from simulator.cli import main as cli_main
from simulator.errors import InputError
from simulator.kineto.replay import list_modules, run_whatif
from tests.data.kineto.synth import Synth, with_kernels

DATA = Path(__file__).parent / "data" / "kineto"
PROFILE = str(DATA / "test-profile.json")
SERVING = DATA / "serving_cpu_sequential.json.gz"


def _stack(s: Synth, post: bool = False, shared_us: float = 30.0) -> None:
    """A dense layer's MLP, then an MoE layer in vLLM's order: shared experts, gate, routed experts, combine."""
    with s.module("DeepseekV2DecoderLayer"), s.module("DeepseekV2MLP"):
        s.launch("dense_up", 20.0)
        s.launch("dense_down", 20.0)
    with s.module("DeepseekV2DecoderLayer"), s.module("DeepseekV2MoE"):
        with s.module("DeepseekV2MLP"):
            s.launch("shared_up", shared_us)
            s.launch("shared_down", shared_us)
        with s.module("ReplicatedLinear"):
            s.launch("gate", 10.0)
        with s.module("FusedMoE"):
            s.launch("routed_up", 40.0)
            s.launch("routed_down", 40.0)
        if post:
            with s.module("Post"):
                s.launch("post", 10.0)
        s.launch("combine", 5.0)


def _write(tmp_path: Path, s: Synth) -> Path:
    path = tmp_path / "t.json"
    path.write_text(s.dumps())
    return path


def test_shared_experts_by_module_path_match_hand_timeline(tmp_path: Path) -> None:
    # Traced (calls every 5 µs from 1000, kernels 1 µs apart on a busy stream): dense 1003..1023, 1024..1044;
    # shared 1045..1075, 1076..1106; gate 1107..1117; routed 1118..1158, 1159..1199; combine 1200..1205: 202.
    # What-if (sim clock = trace - 1002; record/wait/switch 1 µs each): dense 1..21, 22..42 (issued 0, 5);
    # fork 3 µs then shared_up issued 13 on aux, after the fork event (dense_down) -> 43..73; shared_down
    # issued 18 -> 74..104; join record + switch back -> gate issued 25 -> 43..53 beside shared_up; routed
    # issued 30, 35 -> 54..94, 95..135; wait 1 µs, combine issued 41 after routed_down and the join -> 136..141.
    s = Synth()
    _stack(s)
    out = run_whatif(_write(tmp_path, s), None, module="DeepseekV2MoE/DeepseekV2MLP", profile=PROFILE,
                     progress=False).to_json_dict()
    assert out["measured_us"] == pytest.approx(202.0) and out["baseline_us"] == pytest.approx(202.0)
    assert out["whatif_us"] == pytest.approx(140.0)
    assert (out["region_instances"], out["moved_kernels"], out["aux_module"]) == (1, 2, "DeepseekV2MoE/DeepseekV2MLP")


def test_class_alone_selects_every_call_instance_numbers_ignored(tmp_path: Path) -> None:
    s = Synth()
    _stack(s)
    path = _write(tmp_path, s)
    both = run_whatif(path, None, module="DeepseekV2MLP", profile=PROFILE, progress=False)
    assert (both.instances, both.moved) == (2, 4)
    same = run_whatif(path, None, module="DeepseekV2MoE_3/DeepseekV2MLP_0", profile=PROFILE, progress=False)
    assert (same.instances, same.moved) == (1, 2)
    streams = {k.name: k.stream for k in same.whatif.kernels}
    assert streams["shared_up"] == streams["shared_down"] == "aux" and streams["dense_up"] != "aux"


def test_join_after_module_and_mixed_with_a_range(tmp_path: Path) -> None:
    s = Synth()
    _stack(s, post=True, shared_us=300.0)  # the shared experts outlast everything else of the layer
    with s.range("tail"):
        s.launch("tail_kernel", 10.0)
    s.launch("final", 5.0)
    path = _write(tmp_path, s)
    kw = {"module": "DeepseekV2MoE/DeepseekV2MLP", "profile": PROFILE, "progress": False}
    default = {k.name: k for k in run_whatif(path, None, **kw).whatif.kernels}
    assert default["post"].start_us < default["shared_down"].end_us <= default["combine"].start_us
    after = {k.name: k for k in run_whatif(path, None, join_after_module="FusedMoE", **kw).whatif.kernels}
    assert after["routed_down"].end_us <= after["post"].start_us
    assert after["shared_down"].end_us <= after["post"].start_us
    mixed = {k.name: k for k in run_whatif(path, None, join_after="tail", **kw).whatif.kernels}
    assert mixed["tail_kernel"].start_us < mixed["shared_down"].end_us <= mixed["final"].start_us


@pytest.mark.parametrize("kw, message", [
    ({"module": "Nope"}, "no module call path ends with 'Nope' (--aux-module)"),
    ({"module": " / "}, "empty module path"),
    ({"module": "DeepseekV2MLP", "region": "x"}, "give one of --aux-region"),
    ({"module": "DeepseekV2MLP", "join_after_module": "Nope"}, "(--join-after-module)"),
])
def test_bad_selectors_are_input_errors(tmp_path: Path, kw: dict, message: str) -> None:
    s = Synth()
    _stack(s)
    path = _write(tmp_path, s)
    region = kw.pop("region", None)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_whatif(path, region, profile=PROFILE, progress=False, **kw)


def test_trace_without_module_calls_says_how_to_record_them(moe_trace: Path) -> None:
    with pytest.raises(InputError, match="with_stack=True"):
        run_whatif(moe_trace, None, module="DeepseekV2MLP", profile=PROFILE, progress=False)


def test_cli_needs_a_selector_and_lists_modules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = Synth()
    _stack(s)
    path = str(_write(tmp_path, s))
    assert cli_main.main(["whatif", "trace", path, "--profile", PROFILE]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--aux-module PATH" in err and "--aux-region NAME" in err
    assert cli_main.main(["whatif", "trace", path, "--profile", PROFILE, "--list-modules", "--json"]) == 0
    rows = {m["path"]: (m["calls"], m["gpu_ops"], m["gpu_us"]) for m in json.loads(capsys.readouterr().out)["modules"]}
    assert rows == {
        "DeepseekV2DecoderLayer": (2, 8, 195.0),
        "DeepseekV2DecoderLayer/DeepseekV2MLP": (1, 2, 40.0),
        "DeepseekV2DecoderLayer/DeepseekV2MoE": (1, 6, 155.0),
        "DeepseekV2DecoderLayer/DeepseekV2MoE/DeepseekV2MLP": (1, 2, 60.0),
        "DeepseekV2DecoderLayer/DeepseekV2MoE/ReplicatedLinear": (1, 1, 10.0),
        "DeepseekV2DecoderLayer/DeepseekV2MoE/FusedMoE": (1, 2, 80.0),
    }
    assert cli_main.main(["whatif", "trace", path, "--profile", PROFILE, "--list-modules"]) == 0
    text = capsys.readouterr().out
    assert "\n      DeepseekV2MLP" in text and "\n    DeepseekV2MLP" in text  # nesting by indentation


def _serving(tmp_path: Path) -> tuple[Path, dict]:
    doc = with_kernels(json.loads(gzip.decompress(SERVING.read_bytes())))
    path = tmp_path / "serving.json"
    path.write_text(json.dumps(doc))
    return path, doc


def _kernels_inside(doc: dict, module_events: list[str]) -> int:
    """Kernels whose launch call lies inside one of the named ``nn.Module: Class_N`` events (by instance name,
    not by nesting: an oracle independent of the importer's)."""
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
             if e.get("cat") == "python_function" and e["name"] in module_events]
    calls = [e["ts"] for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"]
    return sum(1 for t in calls if any(a <= t <= b for a, b in spans))


def test_profiled_serving_stack_selects_shared_experts_not_dense_mlp(tmp_path: Path) -> None:
    """serving_fixture on CPU, 1 step: DeepseekV2MLP_0 is the dense layer's MLP (built first), _1 and _2 the two
    MoE layers' shared experts."""
    path, doc = _serving(tmp_path)
    listing = {m["path"]: m for m in list_modules(path, PROFILE, progress=False)["modules"]}
    moe = "DeepseekV2ForCausalLM/DeepseekV2Model/DeepseekV2DecoderLayer/DeepseekV2MoE"
    assert listing[f"{moe}/DeepseekV2MLP"]["calls"] == 2 and listing[moe]["calls"] == 2
    assert listing["DeepseekV2ForCausalLM/DeepseekV2Model/DeepseekV2DecoderLayer/DeepseekV2MLP"]["calls"] == 1
    shared = _kernels_inside(doc, ["nn.Module: DeepseekV2MLP_1", "nn.Module: DeepseekV2MLP_2"])
    assert shared > 0 and listing[f"{moe}/DeepseekV2MLP"]["gpu_ops"] == shared
    report = run_whatif(path, None, module="DeepseekV2MoE/DeepseekV2MLP", profile=PROFILE, progress=False)
    assert (report.instances, report.moved) == (2, shared)
    dense = _kernels_inside(doc, ["nn.Module: DeepseekV2MLP_0"])
    every = run_whatif(path, None, module="DeepseekV2MLP", profile=PROFILE, progress=False)
    assert dense > 0 and (every.instances, every.moved) == (3, shared + dense)


def test_forward_frames_stand_in_for_module_events(tmp_path: Path) -> None:
    """A trace whose with_stack events name only the forward frames (``.../deepseek_v2.py(NNN): forward``): each
    frame is a nesting level named ``file.py(line)``."""
    s = Synth()
    _stack(s)
    lines = {"DeepseekV2DecoderLayer": 600, "DeepseekV2MoE": 300, "DeepseekV2MLP": 100, "ReplicatedLinear": 50,
             "FusedMoE": 70}
    for ev in s.events:
        if ev["name"].startswith("nn.Module: "):
            cls = ev["name"][11:].rsplit("_", 1)[0]
            ev["name"] = f"vllm/model_executor/models/deepseek_v2.py({lines[cls]}): forward"
    path = _write(tmp_path, s)
    report = run_whatif(path, None, module="deepseek_v2.py(300)/deepseek_v2.py(100)", profile=PROFILE,
                        progress=False)
    assert (report.instances, report.moved) == (1, 2)
    assert report.whatif_us == pytest.approx(140.0)  # the same move as by class path (hand timeline above)


def test_help_shows_the_vllm_workflow(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main.main(["whatif", "trace", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for needle in ("--aux-module PATH", "--list-modules", "vLLM workflow", "torch_profiler_dir", "--durations-from",
                   "--serialize-aux", "slowest rank"):
        assert needle in text, needle
