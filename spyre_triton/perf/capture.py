"""The launcher's side of the performance model (backend/driver.py calls in here).

`listeners` is empty unless a profile (or a modelled benchmark) is running; the launcher checks it
once per launch and, only then, asks the interpreter to model the launch with `params()` and hands
the result to `record()`. Kept free of heavy imports: the driver imports it.
"""
from __future__ import annotations

listeners: list = []  # objects with _add(record) and trace_programs / trace_events attributes
MAX_PROGRAMS = 1 << 22  # the interpreter models grids up to this many programs
_cache: dict = {}
_names: list = []
_lx: dict = {}  # id(runtime Kernel) -> (name, instructions, LX occupancy profile)


def note_binary(kernel, binary) -> None:
    """Keeps a loaded kernel's LX occupancy profile (the compiler's, in the binary's meta section):
    [instruction index, bytes of live tiles] where it changes."""
    import json
    from spyre_triton.asm import Program
    try:
        prof = json.loads(Program.sections(bytes(binary))["meta"]).get("lx_profile", [])
    except ValueError:
        return
    _lx[id(kernel)] = (kernel.name, kernel.n_insns, [tuple(x) for x in prof])


def lx_profile(kernel) -> list:
    """[(instruction index, LX bytes live)] of a kernel the driver loaded ([] if unknown)."""
    got = _lx.get(id(kernel))
    if got is None or got[0] != getattr(kernel, "name", None) or got[1] != getattr(kernel, "n_insns", None):
        return []  # not loaded through the driver, or a freed kernel's id reused
    return got[2]


def _param_names() -> tuple:
    if not _names:
        from spyre_triton import _runtime
        _names.append(_runtime.perf_param_names())
    return _names[0]


def params(kernel, nprogs: int, hw=None) -> tuple | None:
    """The interpreter's model parameters (cycles and bytes) for a launch of nprogs programs on hw (default:
    the current card) (None: the grid is too large to model; the launch runs unmodelled and record() warns)."""
    from .hardware import _version, get_hardware
    if nprogs > MAX_PROGRAMS:
        return None
    given = hw is not None
    hw = hw if given else get_hardware()
    active = max(1, min(hw.num_cores, nprogs))
    # double buffering needs room in LX for a second copy of the DMA'd tiles
    dbuf = bool(hw.double_buffer) and 2 * int(getattr(kernel, "lx_bytes", 0)) <= hw.lx_bytes
    tp = max((getattr(l, "trace_programs", 0) for l in listeners), default=0)
    te = max((getattr(l, "trace_events", 0) for l in listeners), default=0)
    key = (hw if given else (_version[0], id(hw)), active, dbuf, tp, te)
    got = _cache.get(key)
    if got is not None:
        return got
    clk = hw.clock_hz
    vals = {
        "read_bytes_per_cycle": min(hw.ring_bytes_per_cycle, hw.dram_read_bw / clk / active),
        "write_bytes_per_cycle": min(hw.ring_bytes_per_cycle, hw.dram_write_bw / clk / active),
        "dma_latency": hw.dram_latency_ns * 1e-9 * clk,
        "stick_bytes": hw.stick_bytes,
        "gather_cycles": hw.gather_cycles_per_elem,
        "transpose_cost": hw.transpose_cost,
        "atomic_cycles": hw.atomic_cycles_per_elem,
        "corelets": hw.corelets,
        "pe_rows": hw.pe_rows,
        "pe_cols": hw.pe_cols,
        "pe_simd": hw.pe_simd,
        "pe_fill_drain": hw.pe_fill_drain_cycles,
        "pe_sustained": hw.pe_sustained,
        "pe_rate_8bit": hw.pe_rate_8bit,
        "pe_rate_16bit": hw.pe_rate_16bit,
        "pe_rate_f32": hw.pe_rate_f32,
        "pe_rate_f64": hw.pe_rate_f64,
        "permute_cost": hw.permute_cost,
        "vector_lanes": hw.vector_lanes,
        "sfu_lanes": hw.sfu_lanes,
        "transcendental_cost": hw.transcendental_cost,
        "sfu_reciprocal_cost": hw.sfu_reciprocal_cost,
        "sfu_compound_cost": hw.sfu_compound_cost,
        "sfu_special_cost": hw.sfu_special_cost,
        "divide_cost": hw.divide_cost,
        "vector_latency": hw.vector_latency_cycles,
        "issue_cycles": hw.issue_cycles,
        "queue_depth": hw.queue_depth,
        "branch_cycles": hw.branch_cycles,
        "double_buffer": 1.0 if dbuf else 0.0,
        "trace_programs": tp,
        "trace_events": te,
        "num_cores": hw.num_cores,
    }
    got = tuple(float(vals[n]) for n in _param_names())
    if len(_cache) > 256:
        _cache.clear()
    _cache[key] = got
    return got


# --- sensitivity: the same launch modelled with one figure of the card changed -------------------------
# The assumed figures of HardwareConfig whose effect profile(sensitivity=True) reports.
SENSITIVITY_FIGURES = (
    "clock_hz", "dram_read_bw", "dram_write_bw", "dram_mixed_bw", "dram_latency_ns", "ring_bytes_per_cycle",
    "pe_sustained", "pe_fill_drain_cycles", "pe_rate_16bit", "pe_rate_8bit", "pe_rate_f32",
    "vector_lanes", "sfu_lanes", "transcendental_cost", "sfu_reciprocal_cost", "sfu_compound_cost",
    "sfu_special_cost", "divide_cost", "vector_latency_cycles", "permute_cost",
    "transpose_cost", "gather_cycles_per_elem", "atomic_cycles_per_elem", "issue_cycles", "branch_cycles",
    "launch_ns",
)


def sensitivity_wanted():
    """(figures, step) asked for by a listening profile, or None."""
    for l in listeners:
        figs = getattr(l, "sensitivity_figures", None)
        if figs:
            return figs, l.sensitivity_step
    return None


def _perturbed(hw, name: str, factor: float):
    v = getattr(hw, name) * factor
    if isinstance(getattr(hw, name), int):
        v = max(1, int(round(v)))
    return hw.replace(**{name: v})


def _buffers(kargs) -> dict:
    """base -> size of the device allocations the launch's pointer arguments point into."""
    from spyre_triton import _runtime
    out = {}
    for a in kargs:
        addr = a.data_ptr() if hasattr(a, "data_ptr") else a
        if not isinstance(addr, int) or isinstance(addr, bool) or addr <= 0:
            continue
        dev = _runtime.device_of(addr)
        if dev < 0:
            continue
        ok, base, size = _runtime.mem_check(dev, addr, 1)
        if ok and size > 0:
            out[base] = size
    return out


def snapshot(kargs) -> dict:
    """The bytes of every allocation a launch's pointer arguments point into (before it runs)."""
    import ctypes
    return {base: ctypes.string_at(base, size) for base, size in _buffers(kargs).items()}


def restore(snap: dict) -> None:
    import ctypes
    for base, data in snap.items():
        ctypes.memmove(base, data, len(data))


def sensitivity(kernel, device: int, grid: tuple, kargs, name: str, before: dict, figures, step: float) -> dict:
    """Run the launch again from the state `before` it ran, once per figure and direction (x(1-step),
    x(1+step)), each modelled on the card with that one figure changed; then put back what the real
    launch left. Returns {(figure, factor): modelled ns}."""
    from .hardware import get_hardware
    from .model import make_record
    base = get_hardware()
    import ctypes
    after = {b: ctypes.string_at(b, len(d)) for b, d in before.items()}
    n = grid[0] * grid[1] * grid[2]
    out = {}
    try:
        for fig in figures:
            for factor in (1.0 - step, 1.0 + step):
                hw = _perturbed(base, fig, factor)
                restore(before)
                res = kernel.launch(device, grid[0], grid[1], grid[2], kargs, perf=params(kernel, n, hw))
                if res is not None:
                    out[(fig, factor)] = make_record(name, kernel, grid, res, 0, hw).modeled_ns
    finally:
        restore(after)
    return out


def record(name: str, kernel, grid: tuple, result: dict, wall_ns: int, sens: dict | None = None) -> None:
    """A modelled launch finished: build its record and give it to every listener."""
    from .hardware import get_hardware
    from .model import make_record
    if result is None:
        import warnings
        warnings.warn(f"kernel {name}: a grid of {grid[0] * grid[1] * grid[2]} programs is more than the "
                      f"performance model handles ({MAX_PROGRAMS}); this launch is not in the profile",
                      stacklevel=3)
        return
    rec = make_record(name, kernel, grid, result, wall_ns, get_hardware())
    if sens:
        rec.sensitivity = sens
    for l in list(listeners):
        l._add(rec)
