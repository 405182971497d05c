"""Byte-for-byte comparison of the CLI's outputs before and after a refactor.

Usage: PYTHONPATH=. python benchmarks/compare_outputs.py --save DIR [--bench] [--tree T]      (take a baseline)
       PYTHONPATH=. python benchmarks/compare_outputs.py --against DIR [--bench] [--tree T]   (diff; exit 1 if any)

``--tree`` runs another copy of the code (default: this checkout), e.g. ``git archive BASE | tar -x -C T`` for
the baseline, and an archive with only your changed files copied over for the comparison: the working tree
may hold other writers' unfinished edits that change outputs too.

Runs ``moesim run S --json`` (and ``--trace-out``) on every shipped scenario, ``moesim sim P --json`` (and
``--trace-out``) and ``moesim check P --json`` on every shipped program, ``moesim sim`` on the engine-speed
fork/join program (the default fluid sharing model's fast paths), ``moesim whatif trace`` on the committed
Kineto traces, and ``COMMANDS`` (help texts, argument errors, ``moesim validate`` on the shipped profiles,
calibrate's input errors); each case's stdout, stderr, exit code and written file are kept, with this
checkout's path and the scratch folder replaced by fixed words. ``--bench`` adds ``python -m kernels_real.bench
--device cpu --quick`` (needs torch): its timings differ run to run, so only its structure is kept (files
written, the keys of every record, the gain table with its numbers masked).
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.engine_speed import fork_join_program

ROOT = Path(__file__).resolve().parent.parent
TRACES = Path("tests", "data", "kineto")
WHATIFS = {
    "whatif_eager": ["moe_eager_sequential.json", "--aux-region", "moe.shared_experts"],
    "whatif_graph": ["moe_eager_sequential.json", "--aux-region", "moe.shared_experts", "--launch", "graph"],
    "whatif_join_after": ["moe_eager_sequential.json", "--aux-region", "moe.shared_experts",
                          "--join-after", "moe.routed_experts"],
    "whatif_serialize": ["moe_eager_two_streams.json", "--serialize-aux"],
}
# the commands outside the scenario/program/trace runs: the help texts, argument errors, moesim validate on the
# shipped profile (its summary, --json and --markdown) and calibrate's input errors (none measures: a GPU
# machine would otherwise run the microbenchmarks)
COMMANDS = {
    "help": ["--help"],
    "no_command": [],
    "unknown_command": ["bogus"],
    "validate_help": ["validate", "--help"],
    "validate": ["validate"],
    "validate_json": ["validate", "--json"],
    "validate_markdown": ["validate", "--markdown"],
    "validate_datasheet": ["validate", "--profile", "h200-datasheet", "--measurements",
                           "calibration/measurements/h200/2026-12-02"],
    "validate_unknown_profile": ["validate", "--profile", "nosuch"],
    "calibrate_help": ["calibrate", "--help"],
    "calibrate_no_out": ["calibrate"],
    "calibrate_not_json": ["calibrate", "--out", "{out}.txt", "--from-measurements", "."],
    "calibrate_no_folder": ["calibrate", "--out", "{out}", "--from-measurements", "{out}.missing"],
}


def _run(tree: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -m`` a module of ``tree`` (first on the import path, ahead of an editable install)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, cwd=tree, env=env)


def cases(tree: Path, scratch: Path) -> dict[str, list[str]]:
    """Case name -> moesim arguments; ``{out}`` stands for the case's output file."""
    found: dict[str, list[str]] = {}
    for scenario in sorted((tree / "scenarios").glob("*.yaml")):
        found[f"run_{scenario.stem}"] = ["run", str(scenario), "--json", "--trace-out", "{out}"]
    programs = sorted((tree / "scenarios" / "programs").glob("*.yaml"))
    fork_join = scratch / "fork_join_300.json"
    fork_join.write_text(json.dumps(fork_join_program(300)))
    for program in [*programs, fork_join]:
        found[f"sim_{program.stem}"] = ["sim", str(program), "--json", "--trace-out", "{out}"]
        found[f"check_{program.stem}"] = ["check", str(program), "--json"]
    for name, arguments in WHATIFS.items():
        found[name] = ["whatif", "trace", str(tree / TRACES / arguments[0]), *arguments[1:], "--json"]
    found.update(COMMANDS)
    return found


def _normalise(text: str, tree: Path, scratch: Path) -> str:
    return text.replace(str(scratch), "<scratch>").replace(str(tree), "<repo>")


def run_cases(tree: Path, scratch: Path) -> dict[str, str]:
    """Each case's outputs as one text: exit code, stdout, stderr and the file it wrote."""
    results: dict[str, str] = {}
    for name, arguments in cases(tree, scratch).items():
        out = scratch / f"{name}.out.json"
        done = _run(tree, ["simulator.cli.main", *(a.replace("{out}", str(out)) for a in arguments)])
        written = out.read_text() if out.is_file() else "(none)\n"
        text = (f"$ moesim {' '.join(arguments)}\nexit {done.returncode}\n--- stdout\n{done.stdout}"
                f"--- stderr\n{done.stderr}--- file\n{written}")
        results[name] = _normalise(text, tree, scratch)
    return results


def _shape(value: object, key: str = "") -> object:
    """A JSON value with its numbers (timings) and dates replaced by their type; a list of numbers (samples,
    whose count depends on timing too) becomes one."""
    if isinstance(value, dict):
        return {k: _shape(item, k) for k, item in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(item, int | float) for item in value):
            return [type(value[0]).__name__]
        return [_shape(item) for item in value]
    if isinstance(value, str) and key not in ("date", "time"):
        return _mask(value)
    return type(value).__name__


BENCH_RUNS = {
    "bench_cpu_quick": ["--presets", "deepseek_v2_lite", "qwen3_30b_a3b"],
    "bench_cpu_interleave_eager": ["--presets", "deepseek_v2_lite", "--tokens", "1", "4", "--interleave-eager"],
    "bench_cpu_trace_only": ["--presets", "deepseek_v2_lite", "--tokens", "4", "--strategies", "sequential",
                             "--trace-only", "--eager-trace-calls", "3"],
    "bench_cpu_budget": ["--presets", "llama4_scout", "--budget-s", "0", "--trace-presets"],
    "bench_cpu_bad_input": ["--tokens", "0"],
}


def _mask(text: str) -> str:
    text = re.sub(r"measured on .* \(torch [^)]*\)", "measured on <when> (torch <version>)", text)
    return re.sub(r"[-+]?\d+\.\d+", "<x>", text)


def bench_structure(tree: Path, scratch: Path, name: str, arguments: list[str]) -> str:
    """What ``kernels_real.bench --device cpu --quick`` writes, timings masked."""
    out = scratch / name
    done = _run(tree, ["kernels_real.bench", "--device", "cpu", "--quick", "--out", str(out), *arguments])
    lines = [f"$ kernels_real.bench {' '.join(arguments)}", f"exit {done.returncode}"]
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        lines.append(f"== {path.relative_to(out)}")
        if path.suffix == ".json":
            lines.append(json.dumps(_shape(json.loads(path.read_text())), indent=1, sort_keys=True))
        elif path.name.endswith(".json.gz"):
            trace = json.loads(gzip.decompress(path.read_bytes()))
            lines.append(json.dumps({k: v for k, v in trace.items() if k.startswith("moesim_")
                                     and k != "moesim_median_us"}, indent=1, sort_keys=True))
        else:
            lines.append(_mask(path.read_text()))
    stderr = "".join(line for line in done.stderr.splitlines(True) if not line.startswith("USDT:"))  # profiler's
    lines += ["--- stdout (numbers masked)", _mask(done.stdout), "--- stderr (numbers masked)", _mask(stderr)]
    return _normalise("\n".join(lines) + "\n", tree, scratch)


def collect(tree: Path, bench: bool) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="moesim-compare-") as folder:
        scratch = Path(folder)
        results = run_cases(tree, scratch)
        if bench:
            for name, arguments in BENCH_RUNS.items():
                results[name] = bench_structure(tree, scratch, name, arguments)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--save", type=Path, help="write the outputs to this folder (the baseline)")
    where.add_argument("--against", type=Path, help="compare the outputs with this baseline folder")
    parser.add_argument("--bench", action="store_true", help="also the CPU bench's output structure (torch)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the copy of the code to run (default: this one)")
    args = parser.parse_args()
    results = collect(args.tree.resolve(), args.bench)
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for name, text in results.items():
            (args.save / f"{name}.txt").write_text(text)
        print(f"{len(results)} cases saved to {args.save}")
        return 0
    differ = 0
    for name, text in results.items():
        saved = args.against / f"{name}.txt"
        before = saved.read_text() if saved.is_file() else ""
        if before != text:
            differ += 1
            sys.stdout.writelines(difflib.unified_diff(before.splitlines(True), text.splitlines(True),
                                                       f"baseline/{name}", f"now/{name}", n=1))
    missing = sorted({p.stem for p in args.against.glob("*.txt")} - set(results))
    for name in missing:
        print(f"{name}: in the baseline, not run now")
    print(f"{len(results)} cases: {len(results) - differ} identical, {differ} differ"
          + (f", {len(missing)} missing" if missing else ""))
    return 1 if differ or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
