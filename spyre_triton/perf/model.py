"""A modelled launch: the interpreter's per-program cycles and work counters turned into device
time, utilisation and a bottleneck (docs/perf-model.md).

    kernel cycles = max(slowest core, device-memory floor, ring floor) + launch
    slowest core  = the largest sum of program cycles on one modelled core (programs placed in
                    order on the core that frees first)
    memory floor  = read/read_bw + write/write_bw + turnaround * min(read, write)   (card-wide)
    ring floor    = max(read, write) / (2 x ring_bytes_per_cycle)   (the on-chip ring at the memory's stop)
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

from .hardware import HardwareConfig

# Bottleneck rules (docs/perf-model.md): launch dominates; device memory saturated; cores idle;
# otherwise the busiest unit of the slowest core.
LAUNCH_SHARE = 0.5       # launch cost above this share of the kernel time: "launch"
MEMORY_FLOOR_SHARE = 0.8  # memory floor above this share of the slowest core: "memory"
IMBALANCE_RATIO = 1.5    # slowest core / mean core above this: "imbalance"
UNIT_BOTTLENECK = {"dma_in": "memory", "dma_out": "memory", "pe": "compute", "vector": "vector", "sfu": "sfu",
                   "scalar": "scalar"}

_EVENT = struct.Struct("<IIddd")
_units: list = []


def unit_names() -> tuple:
    if not _units:
        from spyre_triton import _runtime
        _units.append(_runtime.perf_unit_names())
    return _units[0]


@dataclass
class LaunchRecord:
    """One modelled kernel launch. Times are modelled device time unless named wall_*."""
    name: str
    grid: tuple
    programs: int
    modeled_ns: float
    cycles: float                 # kernel cycles, launch included
    cycles_per_core: list         # busy cycles of each modelled core (sum of its programs)
    memory_floor_cycles: float    # what device memory needs for the launch's traffic
    launch_cycles: float
    dma_bytes: int                # bytes moved to and from device memory (whole sticks)
    dma_read_bytes: int
    dma_write_bytes: int
    useful_bytes: int             # bytes of the elements asked for
    flops: int                    # 2 x MACs on the PE array + float operations on vector/SFU
    macs: int
    pe_fraction: float            # MAC rate achieved / card peak
    dma_fraction: float           # bytes/s achieved / device-memory read bandwidth
    lx_bytes: int                 # LX high-water mark of a program (the kernel's `shared`)
    bottleneck: str               # memory | compute | vector | sfu | scalar | imbalance | launch
    unit_busy: dict               # unit -> busy cycles on the slowest core
    unit_total: dict              # unit -> busy cycles summed over cores
    counters: dict                # the interpreter's work counters
    wall_ns: int                  # host time of the launch (the model's own work included)
    hw: HardwareConfig = field(repr=False)
    double_buffered: bool = True
    _kernel: object = field(default=None, repr=False)
    _result: dict = field(default=None, repr=False)
    # profile(sensitivity=True): (HardwareConfig figure, factor) -> modelled ns of this launch on that card
    sensitivity: dict = field(default_factory=dict, repr=False)
    # the metrics card, per modelled core: DMA bytes each way, and the cycles some DMA unit, some compute
    # unit (PE, vector, SFU), and both at once were busy
    core_read_bytes: list = field(default_factory=list)
    core_write_bytes: list = field(default_factory=list)
    core_dma_cycles: list = field(default_factory=list)
    core_compute_cycles: list = field(default_factory=list)
    core_overlap_cycles: list = field(default_factory=list)
    lx_profile: list = field(default_factory=list, repr=False)  # [(instruction, LX bytes live)] (compiler)
    ring_floor_cycles: float = 0.0  # what the on-chip ring needs for the launch's DRAM <-> LX traffic

    # --- the metrics card -------------------------------------------------------------------------
    @property
    def core_utilisation(self) -> list:
        """Per modelled core: the share of the kernel's time (launch excluded) it ran programs."""
        span = self.span_cycles
        return [c / span if span else 0.0 for c in self.cycles_per_core]

    @property
    def span_cycles(self) -> float:
        """The kernel's time in cycles without the launch cost."""
        return max(self.max_cycles, self.memory_floor_cycles, self.ring_floor_cycles)

    @property
    def ring_bytes(self) -> int:
        """Bytes the launch moved over the on-chip ring: every DMA between device memory and a core's
        LX crosses it, so the launch's DMA bytes, reads and writes."""
        return self.dma_bytes

    @property
    def ring_utilisation(self) -> float:
        """The ring's busy share at the memory's stop over the kernel's time (launch excluded): the
        busier direction's bytes against what its two links carry (HardwareConfig.ring_cycles)."""
        span = self.span_cycles
        return self.ring_floor_cycles / span if span else 0.0

    @property
    def core_bytes(self) -> list:
        """Per modelled core: bytes moved to and from device memory."""
        return [r + w for r, w in zip(self.core_read_bytes, self.core_write_bytes)]

    @property
    def overlap(self) -> float:
        """DMA/compute overlap: the share of the shorter of DMA time and compute time (summed over
        cores) during which the other ran too (0: strictly one after the other; 1: fully hidden)."""
        d, c = sum(self.core_dma_cycles), sum(self.core_compute_cycles)
        return sum(self.core_overlap_cycles) / min(d, c) if min(d, c) > 0 else 0.0

    @property
    def lx_peak(self) -> tuple:
        """(LX bytes, instruction index) where the live tiles of a program hold the most LX
        ((lx_bytes, None) when the compiler's profile is not known)."""
        if not self.lx_profile:
            return (self.lx_bytes, None)
        pc, peak = max(self.lx_profile, key=lambda x: (x[1], -x[0]))
        return (peak, pc)

    def lx_peak_source(self) -> str:
        """file:line of the instruction where LX occupancy peaks ('' when unknown)."""
        pc = self.lx_peak[1]
        if pc is None:
            return ""
        _, _, file, line, _ = self.insn_info(pc)
        return f"{file.rsplit('/', 1)[-1]}:{line}" if file else ""

    def lx_at(self, pc: int) -> int:
        """LX bytes held by live tiles when instruction pc runs."""
        held = 0
        for at, nbytes in self.lx_profile:
            if at > pc:
                break
            held = nbytes
        return held

    @property
    def max_cycles(self) -> float:
        return max(self.cycles_per_core) if self.cycles_per_core else 0.0

    @property
    def mean_cycles(self) -> float:
        return sum(self.cycles_per_core) / len(self.cycles_per_core) if self.cycles_per_core else 0.0

    @property
    def imbalance(self) -> float:
        """Slowest core / mean core (1.0: every core equally busy)."""
        m = self.mean_cycles
        return self.max_cycles / m if m else 1.0

    @property
    def achieved_flops(self) -> float:
        return self.flops / (self.modeled_ns * 1e-9) if self.modeled_ns else 0.0

    @property
    def achieved_bandwidth(self) -> float:
        return self.dma_bytes / (self.modeled_ns * 1e-9) if self.modeled_ns else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved to or from device memory."""
        return self.flops / self.dma_bytes if self.dma_bytes else float("inf")

    # --- the schedule -----------------------------------------------------------------------------
    def program_cycles(self) -> array:
        return array("d", self._result["cycles"]) if self._result else array("d")

    def schedule(self):
        """(program index, core, start cycle, cycles) for every program, in program order."""
        if not self._result:
            return []
        cyc = array("d", self._result["cycles"])
        core = array("H", self._result["core"])
        start = array("d", self._result["start"])
        return [(p, core[p], start[p], cyc[p]) for p in range(len(cyc))]

    def events(self):
        """Per-instruction timing of the traced programs: (program, pc, unit, start, busy_end, done),
        cycles from the program's start."""
        if not self._result or not self._result["nevents"]:
            return []
        units = unit_names()
        per = self._result["trace_events"]
        raw = self._result["events"]
        out = []
        for p, n in enumerate(self._result["nevents"]):
            for i in range(n):
                pc, unit, s, b, d = _EVENT.unpack_from(raw, (p * per + i) * _EVENT.size)
                out.append((p, pc, units[unit], s, b, d))
        return out

    def insn_info(self, pc: int):
        """(mnemonic, dtype, file, line, text) of instruction pc of the kernel."""
        try:
            return self._kernel.insn_info(pc)
        except Exception:
            return ("?", "?", None, 0, None)

    def summary(self) -> str:
        return (f"{self.name} grid={self.grid}: {self.modeled_ns / 1e3:.2f} us modelled "
                f"({self.bottleneck}), cores max/mean {self.max_cycles:.0f}/{self.mean_cycles:.0f} cycles, "
                f"DMA {self.dma_bytes / 1e6:.3f} MB, {self.flops / 1e9:.3f} GFLOP, "
                f"PE {100 * self.pe_fraction:.1f}%, DMA {100 * self.dma_fraction:.1f}%")


def classify(launch_cycles, core_max, core_mean, floor, unit_busy) -> str:
    """floor: the larger of the device-memory and the ring floor (both are the memory path)."""
    total = max(core_max, floor) + launch_cycles
    if total <= 0:
        return "launch"
    if launch_cycles > LAUNCH_SHARE * total:
        return "launch"
    if floor >= MEMORY_FLOOR_SHARE * core_max:
        return "memory"
    if core_mean > 0 and core_max / core_mean > IMBALANCE_RATIO:
        return "imbalance"
    if not unit_busy:
        return "scalar"
    unit = max(unit_busy, key=lambda u: unit_busy[u])
    return UNIT_BOTTLENECK.get(unit, unit)


def make_record(name: str, kernel, grid: tuple, res: dict, wall_ns: int, hw: HardwareConfig) -> LaunchRecord:
    units = unit_names()
    core_cycles = [float(c) for c in res["core_cycles"]]
    core_busy = res["core_busy"]
    cnt = dict(res["counters"])
    crit = max(range(len(core_cycles)), key=lambda c: core_cycles[c]) if core_cycles else 0
    unit_busy = {u: float(core_busy[crit][i]) for i, u in enumerate(units)} if core_busy else {}
    unit_total = {u: float(sum(b[i] for b in core_busy)) for i, u in enumerate(units)}
    rd, wr = cnt.get("dma_read_bytes", 0), cnt.get("dma_write_bytes", 0)
    floor = hw.dram_seconds(rd, wr) * hw.clock_hz
    ring = hw.ring_cycles(rd, wr)
    launch = hw.launch_ns * 1e-9 * hw.clock_hz
    core_max = max(core_cycles) if core_cycles else 0.0
    core_mean = sum(core_cycles) / len(core_cycles) if core_cycles else 0.0
    cycles = max(core_max, floor, ring) + launch
    modeled_ns = hw.cycles_to_ns(cycles)
    secs = modeled_ns * 1e-9
    macs = cnt.get("macs", 0)
    flops = 2 * macs + cnt.get("vector_flops", 0)
    lx = int(getattr(kernel, "lx_bytes", 0) or 0)
    extra = res.get("core_extra", {})
    from .capture import lx_profile
    return LaunchRecord(
        name=name, grid=tuple(grid), programs=int(res["programs"]), modeled_ns=modeled_ns, cycles=cycles,
        cycles_per_core=core_cycles, memory_floor_cycles=floor, launch_cycles=launch, dma_bytes=rd + wr,
        dma_read_bytes=rd, dma_write_bytes=wr,
        useful_bytes=cnt.get("dma_read_useful", 0) + cnt.get("dma_write_useful", 0), flops=flops, macs=macs,
        pe_fraction=(2 * macs / secs / hw.peak_flops) if secs else 0.0,
        dma_fraction=((rd + wr) / secs / hw.dram_read_bw) if secs else 0.0,
        lx_bytes=lx, bottleneck=classify(launch, core_max, core_mean, max(floor, ring), unit_busy), unit_busy=unit_busy,
        unit_total=unit_total, counters=cnt, wall_ns=int(wall_ns), hw=hw,
        double_buffered=bool(hw.double_buffer) and 2 * lx <= hw.lx_bytes, _kernel=kernel, _result=res,
        core_read_bytes=list(extra.get("read_bytes", ())), core_write_bytes=list(extra.get("write_bytes", ())),
        core_dma_cycles=list(extra.get("dma_cycles", ())), core_compute_cycles=list(extra.get("compute_cycles", ())),
        core_overlap_cycles=list(extra.get("overlap_cycles", ())), lx_profile=lx_profile(kernel),
        ring_floor_cycles=ring)
