"""Hardware profiles: one TOML per GPU in hwprofiles/, loaded into a frozen pydantic model.

Units live in the key names; every number carries a source in the profile's [sources] table.
A profile is found by name (a file in hwprofiles/) or by path to a user's own TOML.

Per-SM facts and device totals. What one SM does per clock is a fact of the SM's design
(`*_per_clk_per_sm`: tensor FLOPs by dtype, FP32 lanes, MUFU lanes, shared-memory bytes, warp
instructions issued; also the per-SM capacities: shared memory, registers, threads, CTAs). The
GPU-wide rates of the SM units are derived, never stored: per-SM rate x `sm_count` x
`clock_hz` (`tensor_flops_per_s`, `fp32_ops_per_s`, `sfu_exp_per_s`, `smem_bytes_per_s`), so a
what-if of the SM count or the clock moves them, as more SMs of the same kind would. The
shared levels are device totals that no SM owns: HBM bandwidth (set by the memory stacks and
their interface) and L2 bandwidth and capacity (set by the L2 slices of the memory partitions,
which the H100 PCIe with 114 SMs shares with the 132-SM SXM5): a what-if of `sm_count` or
`clock_hz` leaves them alone; set them to change them.
"""

from __future__ import annotations

import sys
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from iosim.core.problem import Dtype


class InputError(ValueError):
    """Bad user input: the CLI prints the message on one line and exits with status 2."""


# A count is a whole number (strict: TOML's `true` or `1e29` is not one); a rate is finite.
Count = Annotated[int, Field(strict=True, gt=0)]
Rate = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
MAX_THREADS_PER_CTA = 1024  # CUDA's limit on one CTA's threads, on every GPU since sm_20
MAX_SMS = 100_000  # ~750x the largest GPU built: a bigger count is a typo, not a what-if


class Efficiency(BaseModel):
    """Fractions of the datasheet peaks that real kernels reach (fitted by `iosim calibrate`).
    `tensor_mma_sync` / `tensor_wgmma`: the tensor pipe's saturated rate for each instruction
    family; `l2`: L2 bandwidth; `l2_capacity`: the share of L2 that holds reusable tiles."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # `true` is no fraction
    hbm: float = Field(0.9, gt=0, le=1)
    l2: float = Field(0.7, gt=0, le=1)
    l2_capacity: float = Field(0.7, gt=0, le=1)
    tensor_wgmma: float = Field(0.8, gt=0, le=1)
    tensor_mma_sync: float = Field(0.6, gt=0, le=1)
    sfu: float = Field(0.9, gt=0, le=1)
    alu: float = Field(0.6, gt=0, le=1)
    smem: float = Field(0.8, gt=0, le=1)


class Pipeline(BaseModel):
    """How one warp's instruction stream runs when too few warps share a scheduler to hide its
    latencies (`iosim.model.timing`): fitted by `iosim calibrate`, in SM clock cycles."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    # cycles a lone warp spends per mma.sync.m16n8k16 (its accumulator dependences and operand
    # fetch); at least the pipe's own cycles per instruction
    mma_sync_cycles: float = Field(8.0, gt=0, le=64)
    # cycles each other instruction (FP32, MUFU, conversions, shuffles, ldmatrix, address
    # arithmetic) holds its warp's scheduler: in a lone warp's stream (the latency it cannot
    # hide) and in the dispatch the sub-partition's warps share with their mma.sync
    # (`iosim.model.timing.Trip.dispatch`); 1 is one issue a clock
    inst_cycles: float = Field(1.0, gt=0, le=64)
    # warp instructions per 32 counted element operations (max, add, FMA, exp each one):
    # conversions, shuffles, predication and addressing that the counts leave out
    inst_per_op: float = Field(2.0, ge=1, le=16)
    # bytes one SM moves between L2 and its shared memory/registers per clock: what a CTA
    # alone on its SM can pull, however much DRAM bandwidth is idle
    sm_load_bytes_per_clk: float = Field(64.0, gt=0, le=512)
    # bytes one SM streams from DRAM per clock, however much DRAM bandwidth is idle: what the
    # SM keeps in flight over DRAM's round trip (Little's law), shared by its CTAs; below
    # sm_load_bytes_per_clk, whose bytes come mostly from L2, sooner. Measured, not fitted
    # (tools/sm_dram_rate.py); None: no ceiling apart from sm_load_bytes_per_clk
    sm_dram_bytes_per_clk: float | None = Field(None, gt=0, le=512)
    # how sharply CTAs whose loads are synchronous overlap one another's phases: the p of the
    # p-norm of chain, bandwidth share and SM throughput (large: perfectly, 1: not at all)
    sync_overlap: float = Field(4.0, ge=1, le=64)
    # cycles a CTA whose loads are synchronous (no cp.async pipeline) waits each trip for its
    # tiles to arrive from DRAM before its warps compute: one DRAM round trip. Measured, not
    # fitted (tools/round_trip.py: the earlier paged decode gather, two a trip)
    load_latency_cycles: float = Field(0.0, ge=0, le=10000)
    # cycles such a wait takes where its lines are in L2 (iosim.kernels KernelSpec.sync_in_l2:
    # lines the kernel prefetched or wrote, its atomics): an L2 round trip. None:
    # load_latency_cycles (profiles fitted before it had its own)
    l2_latency_cycles: float | None = Field(None, ge=0, le=10000)
    # cycles a warp-specialised consumer warpgroup waits at each of its GEMM turns with nothing
    # else to issue (iosim.kernels KernelSpec.turn_waits: wgmma.wait_group, then the turn's
    # barrier hand-over and proxy fence): the tensor pipe's and the SM's barriers' latency, not
    # a memory round trip. None: load_latency_cycles (profiles fitted before it had its own)
    wgmma_wait_cycles: float | None = Field(None, ge=0, le=10000)
    # cycles each instruction of a loop's dependent address chain holds its warp
    # (iosim.kernels KernelSpec.loop_chain: naive.cu's GEMMs compute every 16-byte copy's
    # swizzled address, bound and predicate, and every ldmatrix's address, each from the one
    # before): issue to dependent issue of fixed-latency integer instructions, waits on
    # ldmatrix. Nsight Compute: about 5.5 cycles each, `wait` and `short_scoreboard` stalls
    # (experiments/mid_fwd17). None: inst_cycles (profiles fitted before it had its own)
    chain_inst_cycles: float | None = Field(None, gt=0, le=64)

    @property
    def l2_trip_cycles(self) -> float:
        """l2_latency_cycles, or load_latency_cycles where the profile has none of its own."""
        return self.load_latency_cycles if self.l2_latency_cycles is None else self.l2_latency_cycles

    @property
    def chain_cycles(self) -> float:
        """chain_inst_cycles, or inst_cycles where the profile has none of its own."""
        return self.inst_cycles if self.chain_inst_cycles is None else self.chain_inst_cycles

    @property
    def turn_wait_cycles(self) -> float:
        """wgmma_wait_cycles, or load_latency_cycles where the profile has none of its own."""
        return self.load_latency_cycles if self.wgmma_wait_cycles is None else self.wgmma_wait_cycles


class HardwareProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    gpu_name: str
    arch: str  # nvcc target the kernels are built for, e.g. sm_90a
    sm_count: Count = Field(le=MAX_SMS)
    clock_hz: Rate  # SM clock of every per-clock rate (the tensor peak's)
    hbm_bandwidth_bytes_per_s: Rate  # device total: the memory stacks', whatever the SMs
    hbm_capacity_bytes: Count
    l2_bytes: Count  # device total
    l2_bandwidth_bytes_per_s: Rate  # device total: the L2 slices', whatever the SMs
    # per SM: capacities; every CTA resident on an SM takes its share of them
    smem_per_sm_bytes: Count
    smem_per_block_optin_bytes: Count
    smem_bandwidth_bytes_per_clk_per_sm: Count
    registers_per_sm: Count
    # 255: the most a thread can name (8-bit register numbers) since sm_35; 63 (Fermi, sm_30)
    # is the fewest any CUDA GPU had. The model does not count spills, so fewer would read as
    # free occupancy
    max_registers_per_thread: Count = Field(ge=63, le=255)
    # a CTA of MAX_THREADS_PER_CTA (the most the kernels may launch: knobs.check) must fit
    max_threads_per_sm: Count = Field(ge=MAX_THREADS_PER_CTA, multiple_of=32)
    max_ctas_per_sm: Count
    # per SM per clock: dense tensor-core FLOPs by input dtype (the device peak is derived)
    tensor_flops_per_clk_per_sm: dict[Dtype | str, Rate]
    fp32_lanes_per_clk_per_sm: Count  # FP32 instructions (FMA, add, max) per clock
    sfu_lanes_per_clk_per_sm: Count  # MUFU exp2 per clock
    issue_per_clk_per_sm: Count  # warp instructions issued per clock (schedulers)
    launch_overhead_s: float = Field(strict=True, ge=0, allow_inf_nan=False)
    efficiency: Efficiency = Efficiency()
    pipeline: Pipeline = Pipeline()
    sources: dict[str, str] = {}
    provenance: dict[str, str] = {}  # set by calibrate: gpu, date, data file hash

    @model_validator(mode="before")
    @classmethod
    def _device_peaks(cls, data: object) -> object:
        """A datasheet's device-wide `[tensor_flops_per_s]` (a user's own TOML may give those)
        becomes the per-SM fact: peak / (sm_count x clock_hz)."""
        if not isinstance(data, dict) or "tensor_flops_per_s" not in data:
            return data
        data = dict(data)
        peaks = data.pop("tensor_flops_per_s")
        if "tensor_flops_per_clk_per_sm" in data:
            raise ValueError("give tensor_flops_per_clk_per_sm or tensor_flops_per_s, not both")
        sms, clock = data.get("sm_count"), data.get("clock_hz")
        numbers = (int, float)
        if not (isinstance(peaks, dict) and type(sms) in numbers and type(clock) in numbers
                and sms > 0 and clock > 0):
            raise ValueError("tensor_flops_per_s needs a [tensor_flops_per_s] table and "
                             "positive sm_count and clock_hz")
        data["tensor_flops_per_clk_per_sm"] = {
            k: v / (sms * clock) if type(v) in numbers else v for k, v in peaks.items()}
        sources = dict(data.get("sources") or {})
        if "tensor_flops_per_s" in sources:
            sources.setdefault("tensor_flops_per_clk_per_sm", sources.pop("tensor_flops_per_s"))
            data["sources"] = sources
        return data

    @model_validator(mode="after")
    def _every_number_sourced(self, info: ValidationInfo) -> HardwareProfile:
        """Shipped profiles cite a source for every number; a user's own may not (`load` warns)."""
        missing = self.unsourced()
        if missing and not (info.context or {}).get("sources_optional"):
            raise ValueError(f"[sources] has no entry for: {', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _fields_agree(self) -> HardwareProfile:
        """Numbers that bound each other (a what-if or a typo must not describe no GPU at all)."""
        pairs = [("smem_per_block_optin_bytes", "smem_per_sm_bytes"),
                 ("max_registers_per_thread", "registers_per_sm"),
                 ("max_threads_per_sm", "registers_per_sm"),
                 ("l2_bytes", "hbm_capacity_bytes")]
        for small, big in pairs:
            if getattr(self, small) > getattr(self, big):
                raise ValueError(f"{small} = {getattr(self, small)} is over {big} = "
                                 f"{getattr(self, big)} (allowed: {small} <= {big})")
        return self

    def unsourced(self) -> list[str]:
        """Fields with no entry in [sources]."""
        needed = set(type(self).model_fields) - {"name", "sources", "provenance", "arch"}
        return sorted(needed - set(self.sources))

    @property
    def tensor_flops_per_s(self) -> dict[Dtype | str, float]:
        """Device-wide dense tensor peaks by dtype: the per-SM rate x SMs x clock."""
        return {k: v * self.sm_count * self.clock_hz for k, v in self.tensor_flops_per_clk_per_sm.items()}

    @property
    def fp32_ops_per_s(self) -> float:
        return self.fp32_lanes_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def sfu_exp_per_s(self) -> float:
        return self.sfu_lanes_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def smem_bytes_per_s(self) -> float:
        return self.smem_bandwidth_bytes_per_clk_per_sm * self.sm_count * self.clock_hz

    @property
    def calibrated(self) -> bool:
        return bool(self.provenance)

    def describe(self) -> str:
        """One line: where this profile's efficiencies come from."""
        p = self.provenance
        if not p:
            return "datasheet profile; efficiencies and pipeline not calibrated"
        src = f"from {p['transferred_from'].split(' (')[0]}'s fit, not refitted" \
            if "transferred_from" in p else f"held out ({p.get('holdout_where', '')}): {p.get('holdout_error', '')}"
        return f"calibrated {p.get('date', '')} on {p.get('gpu', '')}; {src}"

    @property
    def has_wgmma(self) -> bool:
        return self.arch.startswith("sm_90")

    def tensor_peak(self, dtype: Dtype) -> float:
        # fp32 inputs run on the tensor cores as tf32.
        key = "tf32" if dtype is Dtype.fp32 else dtype.value
        if key not in self.tensor_flops_per_clk_per_sm:
            raise InputError(
                f"{self.name} has no tensor-core rate for {dtype.value} "
                f"(it has: {', '.join(map(str, self.tensor_flops_per_clk_per_sm))})"
            )
        # tensor_flops_per_s[key], that one entry alone (predict asks it of every Plan)
        return self.tensor_flops_per_clk_per_sm[key] * self.sm_count * self.clock_hz

    def with_changes(self, **changes: object) -> HardwareProfile:
        """A what-if copy with some fields replaced, validated like a loaded profile. Per-SM
        facts stay per SM: a new `sm_count` or `clock_hz` moves the device-wide rates derived
        from them. `tensor_flops_per_s.<dtype>` sets a device peak: its per-SM rate at the
        copy's SM count and clock. A new `smem_per_sm_bytes` moves `smem_per_block_optin_bytes`
        with it (unless that is set too): the driver keeps the same bytes an SM reserves (1 KiB
        on sm_80 and sm_90), so a CTA may opt in to the rest, as on every shipped GPU."""
        data, asked = self.model_dump(), changes
        if "smem_per_sm_bytes" in changes and "smem_per_block_optin_bytes" not in changes:
            reserved = self.smem_per_sm_bytes - self.smem_per_block_optin_bytes
            new = changes["smem_per_sm_bytes"]
            if type(new) is int:
                changes = {**changes, "smem_per_block_optin_bytes": max(new - reserved, 1)}
        peaks = {}
        for k, v in changes.items():
            if k.startswith(("efficiency.", "pipeline.", "tensor_flops_per_clk_per_sm.")):
                table, key = k.split(".", 1)
                data.setdefault(table, {})[key] = v
            elif k.startswith("tensor_flops_per_s."):
                peaks[k.split(".", 1)[1]] = v
            else:
                data[k] = v
        where = f"{self.name} with {asked}"
        if peaks:
            sms, clock = data["sm_count"], data["clock_hz"]
            if not all(type(x) in (int, float) and x > 0 for x in (sms, clock, *peaks.values())):
                raise InputError(f"{where}: tensor_flops_per_s, sm_count and clock_hz must be > 0")
            data["tensor_flops_per_clk_per_sm"].update({k: v / (sms * clock) for k, v in peaks.items()})
        return _validate(data, where, sources_optional=True)


PROFILE_DIR = Path(__file__).resolve().parents[1] / "hwprofiles"  # an installed wheel: iosim/hwprofiles
if not PROFILE_DIR.is_dir():  # editable install / source checkout: hwprofiles/ beside iosim/
    PROFILE_DIR = Path(__file__).resolve().parents[2] / "hwprofiles"


def available() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def _validate(data: dict, where: str, sources_optional: bool = False) -> HardwareProfile:
    try:
        return HardwareProfile.model_validate(data, context={"sources_optional": sources_optional})
    except ValidationError as e:
        errs = e.errors()
        err = next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])
        loc = ".".join(str(x) for x in err["loc"]) or "profile"
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(HardwareProfile.model_fields)
            raise InputError(f"{where}: unknown key '{loc}' (allowed: {allowed})") from None
        raise InputError(f"{where}: {loc}: {err['msg']}") from None


@lru_cache(maxsize=64)
def _parsed(path: str, mtime_ns: int, size: int, shipped: bool) -> HardwareProfile:
    """A profile file parsed and validated, once per version of the file (its modification
    time and size in the key): a caller that loads a profile per call (a cost function's
    loop) reads the same frozen profile, and hits the model's caches kept by profile, where
    parsing the TOML again took ~1.5 ms a call. (An error is raised again each call: not
    cached.)"""
    try:
        data = tomllib.loads(Path(path).read_text())
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the profile: {e}") from None
    return _validate(data, path, sources_optional=not shipped)


def load(name_or_path: str | Path) -> HardwareProfile:
    """A profile by name or by path to a TOML file. A full name picks that file
    (`h100-sxm5-80gb`: the datasheet profile; `h100-sxm5-80gb.calibrated`: the one `iosim
    calibrate` wrote); a short name (`h100`) picks the GPU's calibrated profile where one is
    shipped, else its datasheet profile."""
    text = str(name_or_path)
    path = Path(text)
    if not (path.suffix == ".toml" or path.exists()):
        names = available()
        key = text.lower()
        match = [n for n in names if n.lower() == key]
        if not match:
            base = [n for n in names if "." not in n and n.lower().startswith(key + "-")]
            match = [f"{b}.calibrated" if f"{b}.calibrated" in names else b for b in base]
        if not match:  # a unique prefix of a GPU's name, any case: `H1` is the h100
            base = [n for n in names if "." not in n and n.lower().startswith(key)]
            match = [f"{b}.calibrated" if f"{b}.calibrated" in names else b for b in base]
        if len(match) > 1:
            raise InputError(f"hardware profile '{text}' is ambiguous: it could be "
                             f"{', '.join(match)} (allowed: a longer name or prefix)")
        if len(match) != 1:
            raise InputError(f"unknown hardware profile '{text}' (available: {', '.join(names)}, or a path to a .toml)")
        path = PROFILE_DIR / f"{match[0]}.toml"
    if not path.is_file():
        raise InputError(f"hardware profile file not found: {path}")
    shipped = path.resolve().parent == PROFILE_DIR.resolve()
    stat = path.stat()
    profile = _parsed(str(path), stat.st_mtime_ns, stat.st_size, shipped)
    if not shipped and profile.unsourced():
        print(f"warning: {path}: no [sources] entry for {', '.join(profile.unsourced())} "
              "(fine for a what-if; shipped profiles cite one for every number)", file=sys.stderr)
    return profile
