"""The first fork of a multi-stream replay, in and out of the model, scored on each GPU's runs.

Every bench run times graphs of W layer calls (W weight sets, 2–4), so one layer in W is the first of its replay,
where the multi_stream layer overlaps far less (``benchmarks/replay_first_layer.py``). ``host.graph_first_fork_us``
is what a multi-stream replay loses once at its first fork, measured by ``kernels_real.replay_length_probe``
(``calibration.fit_replay``): nothing in it comes from a layer's gain. Per run, the profile without and with it:
the mean of predicted − measured gain (bias, points), the 1–4-token points within ±1.5 points, and the regret of
the choices beside always multi_stream's (margin 0.5 %). Nothing is fitted to the runs. Not run on AMD hardware.

    PYTHONPATH=. python benchmarks/first_fork.py [--h200-replay-lengths RUN] [--h100-replay-lengths RUN]
    PYTHONPATH=. python benchmarks/first_fork.py --trial-us 4 8     # a sensitivity check, not a measurement
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from h100_fork_join import row

from calibration.fit import with_first_fork
from simulator.errors import InputError, print_or_fail
from simulator.profile import Profile, load_profile
from simulator.validation import recorded_holdout

MEASUREMENTS = Path("calibration/measurements")
RUNS = {
    "h200": tuple(MEASUREMENTS / "h200" / "2026-12-03" / name for name in (
        "kernels_real9", "kernels_real10", "layer_traces_heldout", "layout_means")),
    "h100": tuple(MEASUREMENTS / "h100" / name for name in (
        "2026-12-05/layer_traces_small", "2026-12-05/layer_traces_large", "2026-12-06/layout_means",
        "2026-12-06/ranks_unseen", "2026-12-06/layer_traces_unseen", "2026-12-07/layer_traces_unseen_large")),
}


def with_first_fork_figure(profile: Profile, figure: dict | None) -> Profile:
    """``profile`` with ``host.graph_first_fork_us`` set to ``figure`` (None: without one)."""
    doc = profile.model_dump()
    doc["host"]["graph_first_fork_us"] = figure
    return Profile.model_validate(doc)


def with_figure(name: str, replay_lengths: Path | None) -> Profile:
    """The shipped profile, with the figure measured by ``replay_lengths`` where given (a run of its GPU)."""
    profile = load_profile(name)
    if replay_lengths is not None:  # the H200 profile's held-out presets left out, as calibrate and carry do
        profile = with_first_fork(profile, replay_lengths, lambda _msg: None,
                                  recorded_holdout(load_profile("h200"))[0])
    if profile.host.graph_first_fork_us is None:
        raise InputError(f"profile {name}: no graph_first_fork_us (give a replay-length run of its GPU, or "
                         "--trial-us)")
    return profile


def markdown(measured: dict[str, Path | None], trials: list[float]) -> str:
    """Per GPU and run, the profile without the figure, then with the measured one (or each trial figure)."""
    lines = ["| run | first fork | points | bias (points) | 1–4 tokens within ±1.5 | model regret mean / worst | "
             "always mean / worst |", "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    sources = []
    for name, runs in RUNS.items():
        if trials:
            base = load_profile(name)
            variants = [(f"trial {v:.2f} µs", with_first_fork_figure(  # a sensitivity check, labelled so
                base, {"value": v, "source": "a trial figure, NOT measured"})) for v in trials]
            sources.append(f"{base.describe()}: trial figures {', '.join(f'{v:g}' for v in trials)} µs, NOT measured.")
        else:
            base = with_figure(name, measured.get(name))
            figure = base.host.graph_first_fork_us
            variants = [(f"{figure.value:.2f} µs", base)]
            sources.append(f"{base.describe()}: {figure.value:.2f} µs — {figure.source}.")
        for run in runs:
            lines.append(row("none", with_first_fork_figure(base, None), run))
            lines += [row(label, profile, run) for label, profile in variants]
    return "\n".join([*sources, "Not run on AMD hardware.", "", *lines])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--h200-replay-lengths", type=Path, default=None,
                   help="a replay-length run of the H200 (default: the h200 profile's own figure)")
    p.add_argument("--h100-replay-lengths", type=Path, default=None,
                   help="a replay-length run of the H100 (default: the h100 profile's own figure)")
    p.add_argument("--trial-us", nargs="+", type=float, default=[],
                   help="score these first-fork figures instead of a measured one: a sensitivity check, NOT a "
                        "measurement (each labelled so)")
    args = p.parse_args(argv)
    if any(v < 0 for v in args.trial_us):
        print("error: --trial-us figures must be non-negative", file=sys.stderr)
        return 2
    return print_or_fail(lambda: markdown({"h200": args.h200_replay_lengths, "h100": args.h100_replay_lengths},
                                          args.trial_us))


if __name__ == "__main__":
    sys.exit(main())
