"""Hardware profiles: ceilings, host API costs, kernel-family cost parameters and the sharing model.

A profile is a JSON file under ``simulator/profiles/`` (package data; ``moesim calibrate`` writes them), either
``calibrated`` (fitted from measurements on real hardware) or ``datasheet`` (vendor figures, never measured
here). Every figure names its source, and :meth:`Profile.describe` is the one-liner every output prints.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from simulator.errors import InputError, describe_validation_error
from simulator.ir import HostCosts

Mode = Literal["eager", "graph"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Figure(_Model):
    """One number and where it came from."""

    value: float
    source: str = Field(min_length=1)


class Hardware(_Model):
    model_config = ConfigDict(extra="allow", frozen=True)

    gpu: str
    vendor: Literal["nvidia", "amd"]
    sm_count: int = Field(gt=0, description="SMs (NVIDIA) or CUs (AMD)")
    hbm_GB: float = Field(gt=0)
    l2_MB: float | None = None
    source: str = Field(min_length=1)


class Software(_Model):
    model_config = ConfigDict(extra="allow", frozen=True)

    driver: str | None = None
    torch: str | None = None
    cuda: str | None = None
    hip: str | None = None


class Ceilings(_Model):
    hbm_GBps: Figure
    bf16_tflops: Figure


class HostFigures(_Model):
    """Host API costs (µs) of the eager path and of graph replay."""

    launch_us: Figure
    record_us: Figure
    wait_us: Figure
    set_stream_us: Figure
    sync_us: Figure
    replay_us: Figure
    node_gap_us: Figure
    kernel_gap_us: Figure
    queue_depth: int = Field(1024, ge=1)
    graph_join_us: Figure | None = Field(
        None, description="device latency of a cross-stream edge (event wait) inside a replayed graph, before "
                          "the waiting stream's next kernel; absent: not measured, taken as 0")
    graph_first_fork_us: Figure | None = Field(
        None, description="device time a replay of a graph that forks across streams loses once, at its first "
                          "fork (both branches start this much later): the per-replay excess of multi-stream "
                          "replays over single-stream ones; absent: not measured, taken as 0")
    idle_launch_us: Figure | None = Field(
        None, description="extra eager host time of a launch onto a stream with nothing queued or running, as a "
                          "host-bound layer launches (the figures above are timed behind a busy device); absent: 0")
    launch_by_family_us: dict[str, Figure] = Field(
        {}, description="eager host cost of one torch op launching a kernel of that family (dispatcher and "
                        "Python included); families not listed cost launch_us")
    launch_by_op_us: dict[str, Figure] = Field(
        {}, description="eager host cost of the workload builder's torch op of that name (e.g. router_gemm, "
                        "sort), the layer's Python around it included; ops not listed cost their family's figure")

    def costs(self, mode: Mode = "eager") -> HostCosts:
        """The engine's ``HostCosts``. ``eager``: every figure as measured. ``graph``: for a program whose
        launches all come out of one graph replay without capture ops around them (e.g. a replayed trace):
        no per-op host cost and the node gap between kernels, and no first-fork gap (the engine charges that
        only to explicit replays). Programs that capture and replay explicitly should use ``eager`` costs: the
        engine already charges captured ops nothing."""
        if mode not in ("eager", "graph"):
            raise InputError(f"unknown launch mode {mode!r}; expected eager or graph")
        join = self.graph_join_us.value if self.graph_join_us is not None else 0.0
        first_fork = self.graph_first_fork_us.value if self.graph_first_fork_us is not None else 0.0
        if mode == "graph":
            return HostCosts(sync_us=self.sync_us.value, replay_us=self.replay_us.value,
                             node_gap_us=self.node_gap_us.value, kernel_gap_us=self.node_gap_us.value,
                             join_gap_us=join, node_join_gap_us=join, queue_depth=self.queue_depth)
        return HostCosts(
            launch_us=self.launch_us.value, record_us=self.record_us.value, wait_us=self.wait_us.value,
            set_stream_us=self.set_stream_us.value, sync_us=self.sync_us.value,
            replay_us=self.replay_us.value, node_gap_us=self.node_gap_us.value,
            kernel_gap_us=self.kernel_gap_us.value, node_join_gap_us=join, first_fork_gap_us=first_fork,
            queue_depth=self.queue_depth,
            idle_launch_us=self.idle_launch_us.value if self.idle_launch_us is not None else 0.0,
        )


class KernelFamily(_Model):
    """Cost parameters of one kernel family (see ``simulator.cost``).

    Solo time = ``latency_us`` + max(bytes / (peak HBM × ``bw_eff`` × f), flops / (peak tensor × ``tc_eff``
    × f)) with f = min(1, SM share of the grid / ``fill_sat``); GEMM rows are padded to ``tile_m``."""

    latency_us: float = Field(ge=0)
    bw_eff: float = Field(gt=0, le=1.5)
    tc_eff: float = Field(gt=0, le=1.5)
    fill_sat: float = Field(1.0, gt=0, le=1)
    tile_m: int = Field(64, ge=1, description="row tile of the GEMM kernels (padding and grid size)")
    tile_n: int = Field(128, ge=1, description="column tile of the GEMM kernels (grid size)")
    split_k_depth: int = Field(0, ge=0, description="K depth per split of a split-K GEMM (0: no split-K)")
    elems_per_block: int = Field(4096, ge=1, description="elements one block handles (elementwise grid)")
    resident: Literal["grid", "rows", "full"] = Field(
        "grid", description="SM resources a running kernel holds (its sharing demand): its grid share; the grid "
                            "share × min(1, rows / tile_m) (thin-tile GEMMs leave room beside their blocks); or "
                            "all SMs (persistent full-SM blocks)")
    kernels: int = Field(1, ge=1, description="device kernels one call launches (an ``op:`` family: the median count "
                                              "in the traces it was fitted to); each waits the device gap")
    source: str = Field(min_length=1)


class KernelTable(_Model):
    """Measured solo times of one kernel shape family (fixed dims), as a function of one size ``x``:
    sorted ``(x, µs)`` points, looked up log-log (see ``simulator.cost.table_time``); a kernel costs
    ``fixed_us`` + count × the looked-up time."""

    x: str = Field(min_length=1, description="what x is, e.g. 'M (rows)'")
    points: list[tuple[float, float]] = Field(min_length=1)
    fixed_us: float = Field(0.0, ge=0, description="added once per kernel to count × the looked-up time")
    source: str = Field(min_length=1)


class TableOrigin(_Model):
    """Where a profile's kernel tables were measured, when not on its own GPU (carried from a GPU of the same
    chip by ``calibration.carry --kernel-tables``): that GPU, its ceilings and its fitted kernel families. The cost
    model moves the share of a looked-up time that family's roofline spends streaming there to this profile's
    family and ceilings (``simulator.cost.transferred_time``)."""

    gpu: str = Field(min_length=1)
    hbm_GBps: float = Field(gt=0, description="that GPU's HBM ceiling as its families are fitted against (GB/s)")
    bf16_tflops: float = Field(gt=0, description="that GPU's bf16 tensor ceiling as its families are fitted against")
    families: dict[str, KernelFamily] = Field(min_length=1, description="that GPU's fitted kernel families")
    source: str = Field(min_length=1)

    def family(self, name: str) -> KernelFamily:
        """That GPU's family of this name, else its ``default`` (as :meth:`Profile.family`)."""
        fam = self.families.get(name) or self.families.get("default")
        if fam is None:
            raise InputError(f"kernel_tables_from ({self.gpu}): no kernel family {name!r} and no 'default'")
        return fam


class GroupedShardLaw(_Model):
    """How a grouped GEMM's time changes between two shapes of the same experts (a tensor-parallel shard and the
    whole expert): ``fixed_us`` + rounds × ``round_us`` + weight bytes / ``stream_GBps``, where a round is one
    pass of the ``slots`` persistent CTAs over the output tiles (``tile_m`` rows × ``tile_n`` columns per active
    expert). The cost model uses it for shapes without a measured table: a shard shape takes the measured time of
    its whole-expert shape × law(shard) / law(whole), a shape with no whole-expert table either the law's time
    (``simulator.cost.untabled_grouped_time``)."""

    fixed_us: float = Field(ge=0, description="µs per kernel (launch, prologue, group walk)")
    round_us: float = Field(ge=0, description="µs per round of tiles (pipeline fill and epilogue of a tile)")
    stream_GBps: float = Field(gt=0, description="GB/s at which the active experts' weights stream")
    tile_m: int = Field(64, ge=1, description="output rows of a tile (the traced kernel's CTA tile)")
    tile_n: int = Field(128, ge=1, description="output columns of a tile")
    slots: int = Field(ge=1, description="tiles in flight at once: the persistent kernel's CTAs (one per SM)")
    source: str = Field(min_length=1)

    def time_us(self, K: int, N: int, groups: Sequence[tuple[float, float]]) -> float:
        """µs for ``groups`` of (rows per expert, experts) of a K × N bf16 expert GEMM."""
        rounds = tile_rounds(N, groups, self.tile_m, self.tile_n, self.slots)
        return self.fixed_us + rounds * self.round_us + expert_weight_bytes(K, N, groups) / (self.stream_GBps * 1e3)


def tile_rounds(N: int, groups: Sequence[tuple[float, float]], tile_m: int, tile_n: int, slots: int) -> int:
    """Passes of ``slots`` CTAs over the output tiles of ``groups`` of (rows per expert, experts), N columns."""
    tiles = sum(n * math.ceil(max(x, 1e-9) / tile_m) * math.ceil(N / tile_n) for x, n in groups)
    return math.ceil(tiles / slots)


def expert_weight_bytes(K: int, N: int, groups: Sequence[tuple[float, float]]) -> float:
    """The bf16 K × N weights of every expert the groups hit."""
    return sum(n for _, n in groups) * K * N * 2.0


class Interference(_Model):
    """How concurrent kernels share the device: a form and its parameters."""

    form: Literal["fluid", "slowdown", "residency", "inflight"] = "fluid"
    params: dict[str, float] = {}
    units: dict[str, str] = Field({}, description="per parameter: its unit or meaning, and where its value "
                                                  "comes from (measured, fitted on what, or carried)")
    source: str = Field(min_length=1)
    carried_from: str | None = Field(None, description="the calibrated profile this model was carried from, when "
                                                       "it was not measured on this GPU")

    def sharing_model(self) -> Any:
        """The engine's ``SharingModel`` for this form (imported lazily: the engine may land later)."""
        if self.form == "fluid":
            from simulator.sharing import FluidSharing

            return FluidSharing(**self.params)
        if self.form == "inflight":
            from simulator.inflight import InflightSharing

            return InflightSharing(**self.params)
        from simulator.interference import ResidencySharing, SlowdownSharing

        return (ResidencySharing if self.form == "residency" else SlowdownSharing)(**self.params)


class Link(_Model):
    """Inter-GPU link for collectives: per-direction aggregate bandwidth per GPU and a base latency."""

    bandwidth_GBps: Figure
    latency_us: Figure
    topology: str | None = None


Curve = list[tuple[float, float]]


def _check_curve(points: Curve) -> Curve:
    shares = [u for u, _ in points]
    if not points or shares != sorted(shares) or not all(0.0 <= u <= 1.0 and s >= 1.0 for u, s in points):
        raise ValueError("points are (HBM share in [0, 1], slowdown >= 1) in order of the share, at least one")
    return points


def _interpolate(points: Curve, share: float) -> float:
    prev_u, prev_s = 0.0, 1.0
    for u, s in points:
        if share <= u:
            return prev_s + (s - prev_s) * (share - prev_u) / (u - prev_u) if u > prev_u else s
        prev_u, prev_s = u, s
    return prev_s


class MemoryLatency(_Model):
    """How much slower a latency-bound kernel runs while other kernels draw a share of HBM: measured points
    (HBM utilisation by the others, as a fraction of the ceiling; slowdown ≥ 1), linear between them, 1 at 0 and
    flat past the last. ``points``: the pooled curve; ``classes``: a curve per kernel class where measured
    (``simulator.placement.latency_class`` names a kernel's), the pooled one for a class without its own."""

    points: Curve = Field(min_length=1)
    classes: dict[str, Curve] = {}
    source: str = Field(min_length=1)

    @field_validator("points")
    @classmethod
    def _ordered(cls, points: Curve) -> Curve:
        return _check_curve(points)

    @field_validator("classes")
    @classmethod
    def _classes_ordered(cls, classes: dict[str, Curve]) -> dict[str, Curve]:
        for curve in classes.values():
            _check_curve(curve)
        return classes

    def slowdown(self, share: float, kind: str | None = None) -> float:
        """The slowdown at ``share`` of HBM drawn by the others, of a kernel of class ``kind``."""
        return _interpolate(self.classes.get(kind, self.points) if kind is not None else self.points, share)


class LaunchGeometry(_Model):
    """One GEMM launch as the BLAS library made it on this GPU: the kernel it ran and its launch geometry (thread
    blocks, how many of them one SM holds by registers / threads / shared memory, warps per block)."""

    kernel: str = Field(min_length=1)
    blocks: int = Field(ge=1)
    blocks_per_sm: int = Field(ge=1)
    warps_per_block: int = Field(ge=1)


class LaunchGeometries(_Model):
    """The GEMM launches recorded on this GPU: per launch key (``mm K=.. N=..`` for a bf16 ``F.linear``,
    ``mm_fp32 K=.. N=..`` for the fp32 router, ``grouped_mm G=.. K=.. N=..`` for the routed experts' grouped
    GEMM over ``G`` experts) and the layer's token count (a grouped GEMM: its routed rows), what was launched.
    Only where recorded: no interpolation (the library picks its kernel by heuristics of the exact shape)."""

    launches: dict[str, dict[int, LaunchGeometry]]
    source: str

    def at(self, key: str, tokens: int) -> LaunchGeometry | None:
        return self.launches.get(key, {}).get(tokens)


class Profile(_Model):
    name: str = Field(min_length=1)
    provenance: Literal["calibrated", "datasheet"]
    date: str
    hardware: Hardware
    software: Software = Software()
    ceilings: Ceilings
    host: HostFigures
    kernel_families: dict[str, KernelFamily]
    kernel_tables: dict[str, KernelTable] = {}
    kernel_tables_from: TableOrigin | None = Field(
        None, description="the GPU of the same chip the kernel tables were measured on, where not this one")
    interference: Interference
    grouped_shard_law: GroupedShardLaw | None = Field(
        None, description="a grouped GEMM's time for a shape without a table (a shard of a measured shape, or a "
                          "model never measured); absent: such shapes take the family roofline")
    memory_latency: MemoryLatency | None = Field(
        None, description="latency-bound kernels' slowdown under the others' HBM load (block placement uses it); "
                          "absent: not measured on this GPU")
    issue_warps: Figure | None = Field(
        None, description="resident warps per SM at which the blocks of a light-block GEMM kernel (SIMT, GEMV) "
                          "saturate an SM: blocks packed past it run slower in proportion (block placement uses "
                          "it); absent: a packed kernel slows by its blocks' share of the SMs")
    issue_warps_by_kernel: dict[str, Figure] = Field(
        {}, description="the same per kernel class where measured (``simulator.placement.issue_class``, by kernel "
                        "name: e.g. ``xmma``, cuBLAS's xmma GEMM kernels); a kernel of no listed class takes "
                        "``issue_warps``")
    launch_geometry: LaunchGeometries | None = Field(
        None, description="the GEMM launches recorded on this GPU (kernel, blocks, blocks per SM, warps): the "
                          "shape path places a layer's blocks where every GEMM launch of it is recorded "
                          "(``simulator.placement.sharing_for``); absent: never recorded (e.g. a GPU not measured)")
    link: Link
    measurements: list[str] = []
    fit: dict[str, Any] = {}
    notes: str | None = None

    def describe(self) -> str:
        """One line naming the profile and its provenance; printed by every output."""
        if self.provenance == "calibrated":
            return f"{self.name} (calibrated on {self.hardware.gpu}, {self.date})"
        carried = self.interference.carried_from
        sharing = f", sharing carried from {carried}" if carried else ""
        origin = self.kernel_tables_from
        tables = f", kernel times measured on {origin.gpu}" if origin is not None else ""
        return f"{self.name} (DATASHEET figures{sharing}{tables}, not calibrated)"

    def host_costs(self, mode: Mode = "eager") -> HostCosts:
        return self.host.costs(mode)

    def sharing_model(self) -> Any:
        return self.interference.sharing_model()

    def family(self, name: str) -> KernelFamily:
        """Cost parameters of a family, falling back to the profile's ``default`` family."""
        fam = self.kernel_families.get(name) or self.kernel_families.get("default")
        if fam is None:
            known = ", ".join(sorted(self.kernel_families))
            raise InputError(f"profile {self.name}: no kernel family {name!r} and no 'default' ({known})")
        return fam

    @property
    def hbm_bytes_per_us(self) -> float:
        return self.ceilings.hbm_GBps.value * 1e3

    @property
    def tensor_flops_per_us(self) -> float:
        return self.ceilings.bf16_tflops.value * 1e6


def _profiles_dir() -> Path:
    return Path(str(resources.files("simulator") / "profiles"))


def available_profiles() -> list[str]:
    """Names of the profiles shipped as package data."""
    return sorted(p.stem for p in _profiles_dir().glob("*.json"))


def parse_profile(data: Any, source: str = "<profile>") -> Profile:
    if not isinstance(data, dict):
        raise InputError(f"{source}: a profile is a JSON object")
    try:
        return Profile.model_validate(data)
    except ValidationError as err:
        raise InputError(describe_validation_error(err, source)) from None


def load_profile(name_or_path: str | Path) -> Profile:
    """A profile by name (``simulator/profiles/NAME.json``) or by path to a JSON file."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".json") or "/" in text):
        path = _profiles_dir() / f"{text}.json"
        if not path.is_file():
            known = ", ".join(available_profiles()) or "none"
            raise InputError(f"unknown profile {text!r}; available: {known}")
    try:
        raw = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such profile file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read ({err.__class__.__name__})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        where = f"line {err.lineno} column {err.colno}"
        raise InputError(f"{path}: malformed JSON at {where}: {err.msg}") from None
    return parse_profile(data, str(path))
