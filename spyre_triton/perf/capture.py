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


def _param_names() -> tuple:
    if not _names:
        from spyre_triton import _runtime
        _names.append(_runtime.perf_param_names())
    return _names[0]


def params(kernel, nprogs: int) -> tuple | None:
    """The interpreter's model parameters (cycles and bytes) for a launch of nprogs programs (None:
    the grid is too large to model; the launch runs unmodelled and record() warns)."""
    from .hardware import _version, get_hardware
    if nprogs > MAX_PROGRAMS:
        return None
    hw = get_hardware()
    active = max(1, min(hw.num_cores, nprogs))
    # double buffering needs room in LX for a second copy of the DMA'd tiles
    dbuf = bool(hw.double_buffer) and 2 * int(getattr(kernel, "lx_bytes", 0)) <= hw.lx_bytes
    tp = max((getattr(l, "trace_programs", 0) for l in listeners), default=0)
    te = max((getattr(l, "trace_events", 0) for l in listeners), default=0)
    key = (_version[0], id(hw), active, dbuf, tp, te)
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
        "vector_lanes": hw.vector_lanes,
        "sfu_lanes": hw.sfu_lanes,
        "transcendental_cost": hw.transcendental_cost,
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


def record(name: str, kernel, grid: tuple, result: dict, wall_ns: int) -> None:
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
    for l in list(listeners):
        l._add(rec)
