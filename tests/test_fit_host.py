"""Eager host costs per torch op (calibration.fit_host) from clocked calls, against sums done by hand."""

from __future__ import annotations

import pytest

from calibration.fit_host import fit_host_costs, fit_idle_launch, launch_costs
from simulator.profile import Figure, load_profile


def _op(name: str, us: float, before: float) -> dict:
    return {"name": name, "us": us, "before_us": before}


def _case(ops: list[dict], clocked: float, host_only: float, **key) -> dict:
    return {"mode": "eager", "host_ops": ops, "host_clocked_us": clocked, "host_only_us": host_only, **key}


def test_each_launch_takes_its_call_and_the_host_time_before_it() -> None:
    ops = [_op("Tensor.shape", 1.0, 2.0), _op("linear", 10.0, 1.0),        # 2 + 1 + 1 + 10 = 14
           _op("Tensor.__getitem__", 0.5, 0.5), _op("silu", 3.0, 1.0),     # 0.5 + 0.5 + 1 + 3 = 5
           _op("Tensor.mul", 2.0, 1.0),                                    # 3
           _op("record_function_exit", 1.0, 1.0)]                          # tail: 2 + 4 after the last call
    case = _case(ops, clocked=28.0, host_only=14.0)
    assert launch_costs(case, ["shared_gemm_gate_up", "silu", "mul"]) == pytest.approx([7.0, 2.5, 4.5])


def test_the_idle_device_host_time_scales_where_measured() -> None:
    """A run that timed plain calls onto an idle GPU scales by that time, not the busy-GPU one."""
    ops = [_op("linear", 10.0, 0.0), _op("silu", 10.0, 0.0)]
    busy = _case(ops, clocked=20.0, host_only=10.0)
    assert launch_costs(busy, ["shared_gemm_gate_up", "silu"]) == pytest.approx([5.0, 5.0])
    assert launch_costs({**busy, "host_idle_us": 16.0}, ["shared_gemm_gate_up", "silu"]) == pytest.approx([8.0, 8.0])


def test_a_launch_without_its_torch_call_is_unmatched() -> None:
    case = _case([_op("linear", 10.0, 1.0)], clocked=11.0, host_only=11.0)
    assert launch_costs(case, ["shared_gemm_gate_up", "silu"]) is None
    assert launch_costs(case, ["no_such_builder_op"]) is None


def _layer_calls(scale: float) -> list[dict]:
    """qwen3_30b_a3b's sequential layer (softmax router, renormalised, no shared expert): one call per launch of
    ``scale`` µs, nothing between them."""
    names = ["Tensor.float", "linear", "softmax", "topk", "Tensor.sum", "Tensor.div", "sort", "ones_like", "zeros",
             "Tensor.scatter_add_", "cumsum", "Tensor.__floordiv__", "Tensor.index_select", "_grouped_mm", "silu",
             "Tensor.mul", "_grouped_mm", "Tensor.index_select", "zeros", "Tensor.float", "Tensor.mul",
             "Tensor.index_add_", "Tensor.to"]
    return [_op(n, scale, 0.0) for n in names]


def test_per_op_medians_families_and_the_stream_calls() -> None:
    profile = load_profile("h200")
    n = len(_layer_calls(1.0))
    cases = [_case(_layer_calls(s), n * s, n * s, preset="qwen3_30b_a3b", tokens=t, strategy="sequential")
             for s, t in ((10.0, 1), (20.0, 4), (40.0, 8))]
    # multi_stream's host-only time exceeds sequential's by 30 µs at one point and 50 µs at another: median 40
    cases += [{"mode": "eager", "preset": "qwen3_30b_a3b", "tokens": t, "strategy": "multi_stream",
               "host_only_us": n * s + extra} for s, t, extra in ((10.0, 1, 30.0), (20.0, 4, 50.0))]
    fitted = fit_host_costs(cases, profile, "test")
    assert fitted["launch_by_op_us"]["router_gemm"]["value"] == pytest.approx(20.0)
    assert fitted["launch_by_family_us"]["grouped_gemm"]["value"] == pytest.approx(20.0)
    assert fitted["launch_us"]["value"] == pytest.approx(20.0)
    assert fitted["report"]["unmatched"] == [] and fitted["report"]["multi_stream_pairs"] == 2
    micro = {k: getattr(profile.host, f"{k}_us").value for k in ("record", "wait", "set_stream")}
    factor = 40.0 / (2 * sum(micro.values()))
    for key, value in micro.items():
        assert fitted[f"{key}_us"]["value"] == pytest.approx(value * factor)
    # two of each stream call per layer: together they cost the measured difference
    assert 2 * sum(fitted[f"{k}_us"]["value"] for k in micro) == pytest.approx(40.0)


def test_idle_launch_is_the_host_bound_calls_excess_per_launch() -> None:
    """qwen3_30b_a3b's sequential layer launches 23 kernels. Host-bound cases (900 µs of host time against a
    device time of a few hundred µs) whose steady call is 23 × 2, 23 × 3 and 23 × 10 µs longer: median 3 µs per
    launch. A device-bound case (10 µs of host time) and one without a steady call are not read."""
    profile = load_profile("h200")
    key = {"preset": "qwen3_30b_a3b", "strategy": "sequential", "mode": "eager"}
    cases = [{**key, "tokens": t, "host_only_us": 900.0, "steady_median_us": 900.0 + 23 * k}
             for t, k in ((1, 2.0), (2, 3.0), (4, 10.0))]
    cases += [{**key, "tokens": 1024, "host_only_us": 10.0, "steady_median_us": 5000.0},
              {**key, "tokens": 8, "host_only_us": 900.0}]
    figure = fit_idle_launch(cases, profile, "test")
    assert figure["value"] == pytest.approx(3.0)
    assert "median of 3 cases" in figure["source"]
    host = profile.host.model_copy(update={"idle_launch_us": Figure(**figure)})
    assert host.costs("eager").idle_launch_us == pytest.approx(3.0)  # the engine's cost
    assert host.costs("graph").idle_launch_us == 0.0  # replays launch no kernel from the host
    assert fit_idle_launch(cases[3:], profile, "test") is None


def test_no_matched_case_is_an_error() -> None:
    case = _case([_op("linear", 1.0, 0.0)], 1.0, 1.0, preset="qwen3_30b_a3b", tokens=1, strategy="sequential")
    with pytest.raises(ValueError, match="no eager case"):
        fit_host_costs([case], load_profile("h200"), "test")


def test_eager_host_table_sums_the_builder_host_costs(tmp_path) -> None:
    import json

    from tests.helpers_benchmarks import load_benchmark

    eh = load_benchmark("eager_host")
    base = load_profile("h200")
    doc = json.loads(base.model_dump_json())
    names = ["to_float", "router_gemm", "softmax", "topk", "sum", "div", "sort", "ones_like", "zeros", "scatter_add",
             "cumsum", "div_index", "index_select", "grouped_mm_gate_up", "silu", "mul", "grouped_mm_down", "to_bf16",
             "index_add"]
    doc["host"]["launch_by_op_us"] = {n: {"value": 10.0, "source": "test"} for n in names}
    profile = type(base).model_validate(doc)
    case = {"preset": "qwen3_30b_a3b", "tokens": 4, "strategy": "sequential", "mode": "eager"}
    assert eh.host_sum(profile, case) == pytest.approx(23 * 10.0)  # 23 launches (test above), no stream calls
    run = tmp_path / "run"
    run.mkdir()
    (run / "cases.json").write_text(json.dumps([{**case, "median_us": 500.0, "host_only_us": 200.0}]))
    [row] = eh.rows(profile, run)
    assert row["host_predicted_us"] == pytest.approx(230.0) and row["host_only_us"] == 200.0
    assert "| qwen3_30b_a3b | sequential | 200 µs | 230 µs | +15.0 % |" in eh.markdown(profile, run, [row])
