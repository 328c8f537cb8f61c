"""The modelled Spyre card: every figure the performance model uses, in one frozen object.

Each default is a public figure or a modelling choice; docs/perf-model.md gives each one's source:
the IBM Research blog "Lifting the cover on the IBM Spyre accelerator", the torch-spyre project
(github.com/torch-spyre/torch-spyre: its docs and _inductor/cost_model.py) and IBM's KTIR emulator
(github.com/torch-spyre/ktir-cpu: latency.py). Override any of them:

    spyre_triton.set_hardware(clock_hz=1.0e9)                 # from now on
    spyre_triton.set_hardware(HardwareConfig(num_cores=16))
    with spyre_triton.profile(hw=HardwareConfig(dram_read_bw=204.8e9)) as prof: ...
    SPYRE_HW="clock_hz=1e9,dram_read_bw=2.048e11" python script.py
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields, replace

from spyre_triton import config as _config
from spyre_triton import isa as _isa


@dataclass(frozen=True)
class HardwareConfig:
    # --- chip and core (IBM Research blog; torch-spyre docs) -------------------------------------
    num_cores: int = 32                     # AI cores per card
    corelets: int = 2                       # per core, sharing one LX
    clock_hz: float = 1.5e9                 # derived: 98.304e12 / (32 * 2 * 512 * 2)
    lx_bytes: int = 2 * 1024 * 1024         # LX scratchpad per core
    lx_data_bytes: int = _config.LX_TILE_BYTES  # the part of LX the compiler gives to tiles
    # --- device memory ---------------------------------------------------------------------------
    dram_read_bw: float = 150e9             # B/s, one direction, measured (torch-spyre cost_model.py)
    dram_write_bw: float = 150e9            # B/s, one direction
    dram_mixed_bw: float = 105e9            # B/s, balanced read+write (the read/write turnaround)
    dram_latency_ns: float = 300.0          # DMA issue to data in LX (a modelling choice)
    stick_bytes: int = 128                  # DMA and layout granule: 64 fp16 / 32 fp32
    ring_bytes_per_cycle: float = 128.0     # per direction: caps one core's DMA rate
    # --- PE array (per corelet) ------------------------------------------------------------------
    pe_rows: int = 8
    pe_cols: int = 8
    pe_simd: int = 8                        # 8 x 8 PEs x 8-wide SIMD = 512 MAC/cycle per corelet
    pe_fill_drain_cycles: float = 16.0      # rows + cols: once per dot instruction
    pe_sustained: float = 1140.0 / 1536.0   # sustained / datasheet MAC rate (torch-spyre calibration)
    # PE throughput of dot inputs relative to f16 (isa.py's DType.pe_rate are the defaults)
    pe_rate_8bit: float = _isa.DTYPE_BY_NAME["i8"].pe_rate     # int8 and the fp8 formats
    pe_rate_16bit: float = _isa.DTYPE_BY_NAME["f16"].pe_rate   # f16, bf16 (the peak's reference)
    pe_rate_f32: float = _isa.DTYPE_BY_NAME["f32"].pe_rate     # no fp32 multipliers: a quarter
    pe_rate_f64: float = _isa.DTYPE_BY_NAME["f64"].pe_rate
    # --- vector unit and SFU (per corelet) ------------------------------------------------------
    vector_lanes: int = 64                  # fp16 elements per cycle (32 fp32): one stick
    sfu_lanes: int = 64                     # ktir-cpu latency.py: 64 fp16 lanes/cycle
    transcendental_cost: float = 4.0        # ktir-cpu latency.py: 4x an elementwise op
    # the other SFU cost classes (isa.SFU_COST_CLASSES), cycles per lane like transcendental_cost
    sfu_reciprocal_cost: float = 4.0        # sqrt, rsqrt, 1/x: one SFU pass, as exp or sin
    sfu_compound_cost: float = 8.0          # pow, atan2, cbrt: two passes
    sfu_special_cost: float = 16.0          # gamma, Bessel, inverse erf: a series of about four passes
    divide_cost: float = 4.0                # division/remainder: a reciprocal and a multiply
    vector_latency_cycles: float = 4.0
    permute_cost: float = 2.0               # a tcopy whose innermost source stride is not 1 (a permute)
    # --- sequencer and DMA engine ----------------------------------------------------------------
    issue_cycles: float = 1.0               # in-order issue, one instruction per cycle
    queue_depth: int = 64                   # instructions waiting per unit before issue stalls
    branch_cycles: float = 2.0
    gather_cycles_per_elem: float = 1.0     # address generation of gather/scatter
    transpose_cost: float = 150.0 / 116.0   # a transposing DMA (restickify): 116 GB/s measured
    atomic_cycles_per_elem: float = 16.0    # a read-modify-write at the memory controller
    double_buffer: bool = True              # a DMA into LX may fill a second copy of its tile
    # --- launch ----------------------------------------------------------------------------------
    launch_ns: float = 1000.0               # kernel dispatch on the card
    # --- card to card (docs/distributed.md) ------------------------------------------------------
    # Each card has one PCIe Gen5 x16 link (torch-spyre docs): 32 GT/s x 16 lanes, 128b/130b, is
    # 63 GB/s per direction; 50 GB/s is what a peer-to-peer DMA is assumed to reach (80%).
    link_bw: float = 50e9                   # B/s per direction, per card
    link_latency_ns: float = 2000.0         # one transfer's set-up through the switch (assumed)
    # The cards of a drawer (8 on a Power11) share a PCIe switch: every pair talks directly and each
    # card's link carries only its own traffic (assumed topology). Collectives run as rings.
    link_topology: str = "switch"
    drawer_cards: int = 8

    # --- derived figures -------------------------------------------------------------------------
    @property
    def macs_per_cycle_per_core(self) -> int:
        return self.corelets * self.pe_rows * self.pe_cols * self.pe_simd

    @property
    def peak_flops(self) -> float:
        """fp16 matmul peak of the card, FLOP/s (98.3e12 by default: the published figure)."""
        return 2.0 * self.num_cores * self.macs_per_cycle_per_core * self.clock_hz

    @property
    def vector_peak_flops(self) -> float:
        """fp16 elementwise peak of the card, FLOP/s (one operation per lane per cycle)."""
        return float(self.num_cores * self.corelets * self.vector_lanes * self.clock_hz)

    @property
    def turnaround_s_per_byte(self) -> float:
        """Extra time per byte of min(read, write) traffic: the bus turnaround that brings a
        balanced copy from the one-direction bandwidth down to dram_mixed_bw."""
        return max(0.0, 2.0 / self.dram_mixed_bw - 1.0 / self.dram_read_bw - 1.0 / self.dram_write_bw)

    def dram_seconds(self, read_bytes: float, write_bytes: float) -> float:
        """Time device memory needs to serve a launch's traffic (the card-wide floor)."""
        return (read_bytes / self.dram_read_bw + write_bytes / self.dram_write_bw
                + self.turnaround_s_per_byte * min(read_bytes, write_bytes))

    @property
    def ring_stop_bytes_per_cycle(self) -> float:
        """What the on-chip ring carries to or from device memory per cycle, each way: the memory's
        ring stop sends reads out on its two links (one per ring direction) and takes writes in on
        both (docs/perf-model.md, "The on-chip ring")."""
        return 2.0 * self.ring_bytes_per_cycle

    def ring_cycles(self, read_bytes: float, write_bytes: float) -> float:
        """Cycles the ring needs for a launch's DRAM <-> LX traffic (the card-wide ring floor): reads
        and writes flow in opposite directions through the memory's stop, so the busier one counts."""
        return max(read_bytes, write_bytes) / self.ring_stop_bytes_per_cycle

    def cycles_to_ns(self, cycles: float) -> float:
        return cycles / self.clock_hz * 1e9

    def replace(self, **changes) -> "HardwareConfig":
        return replace(self, **changes)

    def describe(self) -> str:
        return (f"{self.num_cores} cores x {self.corelets} corelets @ {self.clock_hz / 1e9:.2f} GHz, "
                f"PE peak {self.peak_flops / 1e12:.1f} TFLOP/s, DRAM {self.dram_read_bw / 1e9:.0f} GB/s "
                f"({self.dram_mixed_bw / 1e9:.0f} mixed), LX {self.lx_bytes >> 20} MiB/core")


def _convert(field: dataclasses.Field, value):
    if isinstance(value, str) and field.type in ("str", str):
        return value.strip()
    if isinstance(value, str):
        if field.type in ("bool", bool):
            return value.strip().lower() in ("1", "true", "yes", "on")
        if field.type in ("int", int):
            return int(float(value))
        return float(value)
    return value


def _check(hw: HardwareConfig) -> HardwareConfig:
    for name in ("num_cores", "corelets", "pe_rows", "pe_cols", "pe_simd", "vector_lanes", "sfu_lanes",
                 "stick_bytes", "queue_depth"):
        if getattr(hw, name) < 1:
            raise ValueError(f"HardwareConfig.{name} must be >= 1, not {getattr(hw, name)}")
    if hw.link_topology != "switch":
        raise ValueError(f"HardwareConfig.link_topology: only 'switch' is modelled, not {hw.link_topology!r}")
    for name in ("clock_hz", "dram_read_bw", "dram_write_bw", "dram_mixed_bw", "ring_bytes_per_cycle",
                 "pe_sustained", "link_bw", "pe_rate_8bit", "pe_rate_16bit", "pe_rate_f32", "pe_rate_f64",
                 "permute_cost"):
        if not getattr(hw, name) > 0:
            raise ValueError(f"HardwareConfig.{name} must be > 0, not {getattr(hw, name)}")
    if hw.num_cores > 4096:
        raise ValueError("HardwareConfig.num_cores must be <= 4096")
    if hw.queue_depth > 64:
        raise ValueError("HardwareConfig.queue_depth must be <= 64")
    return hw


def from_string(spec: str, base: HardwareConfig | None = None) -> HardwareConfig:
    """'clock_hz=1e9,dram_read_bw=2e11' (the SPYRE_HW format) applied to base (the defaults)."""
    by_name = {f.name: f for f in fields(HardwareConfig)}
    changes = {}
    for item in spec.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in by_name:
            raise ValueError(f"SPYRE_HW: {item!r} is not name=value with a HardwareConfig field name "
                             f"({', '.join(by_name)})")
        changes[key] = _convert(by_name[key], value)
    return _check(replace(base or HardwareConfig(), **changes))


_current: list[HardwareConfig] = []
_version = [0]  # bumped on every change: the launcher caches parameters per version


def get_hardware() -> HardwareConfig:
    """The card the model describes now (SPYRE_HW is read on first use)."""
    if not _current:
        spec = os.environ.get("SPYRE_HW", "")
        _current.append(from_string(spec) if spec else HardwareConfig())
    return _current[0]


def set_hardware(hw: HardwareConfig | None = None, /, **overrides) -> HardwareConfig:
    """Change the modelled card: a HardwareConfig, field overrides of the current one, or nothing
    (back to the defaults and SPYRE_HW). Returns the previous configuration."""
    prev = get_hardware()
    if hw is None and not overrides:
        _current.clear()
        new = get_hardware()
    else:
        by_name = {f.name: f for f in fields(HardwareConfig)}
        bad = set(overrides) - set(by_name)
        if bad:
            raise TypeError(f"unknown HardwareConfig fields: {sorted(bad)}")
        new = _check(replace(hw if hw is not None else prev,
                             **{k: _convert(by_name[k], v) for k, v in overrides.items()}))
    _current[:] = [new]
    _version[0] += 1
    return prev
