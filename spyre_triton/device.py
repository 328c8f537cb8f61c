"""The `spyre` PyTorch device: registration, and the `torch.spyre` module (this module).

`register()` renames PyTorch's PrivateUse1 backend to `spyre`, loads the C++ device extension
(`spyre_triton._device`: guard, hooks, allocator, kernels, CPU fallback) and registers this module
as `torch.spyre`. The functions below follow `torch.cuda`'s meanings. Device memory lives in the
runtime's allocation tables (`spyre_triton._runtime`), which is where the memory statistics come from.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

import torch

__all__ = [
    "register", "is_available", "is_initialized", "init", "device_count", "current_device",
    "set_device", "device", "device_of", "synchronize", "memory_allocated", "max_memory_allocated",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "empty_cache", "mem_get_info", "manual_seed", "manual_seed_all", "seed",
    "seed_all", "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
    "set_rng_state_all", "default_generators", "Stream", "Event", "current_stream",
    "default_stream", "stream", "set_stream", "get_device_name", "get_amp_supported_dtype",
    "is_bf16_supported", "fallback_counts", "reset_fallback_counts", "memory_stats", "memory_summary",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction", "OutOfMemoryError",
    "graph", "SpyreGraph", "make_graphed_callables", "get_device_properties", "get_device_capability",
    "utilization",
]

_lock = threading.RLock()
_registered = False
_C: Any = None   # spyre_triton._device
_registered_ns = 0  # time.monotonic_ns() at register(): utilization's first window starts there
_rt: Any = None  # spyre_triton._runtime
default_generators: tuple = ()


def register() -> None:
    """Make `spyre` a PyTorch device (idempotent)."""
    global _registered, _C, _rt, default_generators
    with _lock:
        if _registered:
            return
        if torch._C._get_privateuse1_backend_name() != "spyre":
            torch.utils.rename_privateuse1_backend("spyre")
        from . import _runtime
        from . import _device
        _rt, _C = _runtime, _device
        from . import numerics
        numerics._sync_device()  # SPYRE_NUMERICS / numerics.mode() for host-device copies
        default_generators = tuple(_C.default_generator(i) for i in range(_rt.device_count()))
        if getattr(torch, "spyre", None) is not sys.modules[__name__]:
            torch._register_device_module("spyre", sys.modules[__name__])
        if not hasattr(torch.Tensor, "is_spyre"):
            torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
        from . import eager_numerics  # accelerator accumulation for a few half-precision eager ops
        eager_numerics.register()
        from . import inductor  # torch.compile on spyre: lazy, imports no Dynamo/Inductor here
        inductor.register()
        from . import distributed  # the spyreccl backend of torch.distributed
        distributed.register()
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _C.profiler_set_switch(_profiler_switch)  # torch.profiler's PrivateUse1 device track
        global _registered_ns
        import time
        _registered_ns = time.monotonic_ns()
        _registered = True


def _after_fork_in_child() -> None:
    """A forked child of a process that used spyre runs torch's CPU ops single-threaded.

    spyre's eager path runs torch's CPU kernels on device memory, so the parent has started torch's
    OpenMP (libgomp) team; libgomp's team does not survive fork, and the child's next parallel region
    waits for it forever. One thread never enters a parallel region. spyre's own core threads are
    recreated by the runtime (launch.c)."""
    if torch.get_num_threads() > 1 and any(_rt.max_memory_reserved(d) > 0 for d in range(_rt.device_count())):
        torch.set_num_threads(1)


class _ProfilerFeed:
    """While a torch.profiler session with ProfilerActivity.PrivateUse1 records, the performance model
    hands each launch to it; it gives the launch's modelled time to the session's device track
    (spyre_triton/csrc/profiler.cpp)."""
    trace_programs = 0
    trace_events = 0

    def _add(self, rec) -> None:
        _C.profiler_record(rec.name, _C.current_device(), int(rec.wall_ns), float(rec.modeled_ns),
                           "x".join(str(g) for g in rec.grid), float(rec.flops), float(rec.dma_bytes))


_profiler_feed = _ProfilerFeed()


def _profiler_switch(on: bool) -> None:
    from spyre_triton.perf import capture
    if on and _profiler_feed not in capture.listeners:
        capture.listeners.append(_profiler_feed)
    elif not on and _profiler_feed in capture.listeners:
        capture.listeners.remove(_profiler_feed)


def _check():
    if not _registered:
        register()


def _index(dev=None, optional: bool = True) -> int:
    """A device index from None (the current device), an int, a string or a torch.device."""
    _check()
    if dev is None:
        return _C.current_device()
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "spyre":
            raise ValueError(f"expected a spyre device, got {dev}")
        return _C.current_device() if dev.index is None else dev.index
    if isinstance(dev, int):
        return _C.current_device() if dev < 0 and optional else dev
    raise TypeError(f"cannot interpret {dev!r} as a spyre device")


# --- devices ----------------------------------------------------------------------------------
# A process sees a drawer of 8 cards (or LOCAL_WORLD_SIZE of them under a larger torchrun job;
# SPYRE_DEVICE_COUNT sets the number). A card costs nothing until used: its allocation table is
# empty and its cores' worker threads start on its first launch.
def is_available() -> bool:
    _check()
    return _rt.device_count() > 0


def is_initialized() -> bool:
    return _registered


def init() -> None:
    _check()


def _lazy_init() -> None:
    _check()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    _check()
    return _rt.device_count()


def current_device() -> int:
    _check()
    return _C.current_device()


def set_device(device) -> None:
    idx = _index(device)
    if idx >= 0:
        _C.set_device(idx)


class device:
    """Context manager that changes the current spyre device (like torch.cuda.device)."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device, optional=False)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.exchange_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            _C.set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor) current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_spyre else None)


def get_device_name(device=None) -> str:
    return f"Spyre (simulated) {_index(device)}"


def get_device_properties(device=None):
    """The card's properties, as torch.cuda.get_device_properties gives: name, major/minor,
    total_memory, cores (multi_processor_count), corelets_per_core, lx_bytes, clock_rate (kHz),
    peak_flops, memory_bandwidth, ... The compiler's figures and the performance model's card
    (spyre_triton.get_hardware()); spyre_triton/inductor/device.py lists them."""
    from spyre_triton.inductor.device import get_device_properties as props
    idx = _index(device)
    if not 0 <= idx < device_count():
        raise ValueError(f"get_device_properties: invalid spyre device index {idx} ({device_count()} device(s))")
    return props(idx)


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor) of the architecture: (1, 0) for "spyre1", as torch.cuda's (8, 0) for sm_80."""
    p = get_device_properties(device)
    return p.major, p.minor


_util_samples: dict[int, tuple[int, int]] = {}


def utilization(device=None) -> int:
    """Percent of host wall time the card spent running kernel launches since the previous call
    for that card (the first call: since the process registered spyre), as torch.cuda.utilization
    gives the percent of a recent sample period in which a kernel was executing. The simulator's
    launch time is host time, not the modelled device time (spyre_triton.profile() models that)."""
    import time
    idx = _index(device)
    if not 0 <= idx < device_count():
        raise ValueError(f"utilization: invalid spyre device index {idx} ({device_count()} device(s))")
    now, busy = time.monotonic_ns(), _rt.busy_ns(idx)
    t0, b0 = _util_samples.get(idx, (_registered_ns, 0))
    _util_samples[idx] = (now, busy)
    if now <= t0:
        return 0
    return max(0, min(100, round(100 * (busy - b0) / (now - t0))))


def synchronize(device=None) -> None:
    """Wait for all work on the device. Launches run to completion before they return, so this
    only calls the runtime's own `synchronize` if it has one."""
    idx = _index(device)
    sync = getattr(_rt, "synchronize", None)
    if sync is not None:
        sync(idx)


# --- memory -----------------------------------------------------------------------------------
def memory_allocated(device=None) -> int:
    """Bytes of device memory held by live tensors (and other allocations) on the device."""
    return _rt.memory_allocated(_index(device))


def max_memory_allocated(device=None) -> int:
    return _rt.max_memory_allocated(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    _rt.reset_peak_memory_stats(_index(device))


reset_max_memory_allocated = reset_peak_memory_stats


def memory_reserved(device=None) -> int:
    """Bytes held from the host: live allocations (rounded up to 128-byte sticks, or to 2 MB pages when
    large) and the freed blocks the caching allocator keeps for reuse."""
    return _rt.memory_reserved(_index(device))


def max_memory_reserved(device=None) -> int:
    return _rt.max_memory_reserved(_index(device))


def empty_cache(device=None) -> None:
    """Return the freed blocks the device keeps for reuse to the host (memory_reserved drops by as much)."""
    _rt.empty_cache(_index(device))


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes; total is the card's limit (its capacity unless set_per_process_memory_fraction
    lowered it)."""
    idx = _index(device)
    total = _rt.memory_limit(idx)
    return max(total - _rt.memory_allocated(idx), 0), total


OutOfMemoryError = torch.OutOfMemoryError  # what an allocation beyond a card's limit raises, as torch.cuda's


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Limit the card's allocations to `fraction` of its capacity; one beyond raises OutOfMemoryError."""
    if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"set_per_process_memory_fraction: fraction must be a number in [0, 1], got {fraction!r}")
    _rt.set_memory_limit(_index(device), int(fraction * _rt.device_memory_capacity()))


def get_per_process_memory_fraction(device=None) -> float:
    return _rt.memory_limit(_index(device)) / _rt.device_memory_capacity()


def memory_stats(device=None) -> dict[str, int]:
    """The card's memory statistics under torch.cuda.memory_stats()'s keys (pool "all"; this allocator has
    no small/large pools): allocated_bytes and active_bytes (live tensors), reserved_bytes (held from the
    host, cached blocks included), allocation (live allocations), each with .current and .peak."""
    idx = _index(device)
    allocated, peak = _rt.memory_allocated(idx), _rt.max_memory_allocated(idx)
    count = _rt.allocation_count(idx)
    return {
        "allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": peak,
        "active_bytes.all.current": allocated, "active_bytes.all.peak": peak,
        "reserved_bytes.all.current": _rt.memory_reserved(idx),
        "reserved_bytes.all.peak": _rt.max_memory_reserved(idx),
        "inactive_split_bytes.all.current": _rt.memory_cached(idx),
        "allocation.all.current": count, "active.all.current": count,
        "limit_bytes": _rt.memory_limit(idx), "capacity_bytes": _rt.device_memory_capacity(),
    }


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A printable table of memory_stats(), as torch.cuda.memory_summary() gives."""
    idx = _index(device)
    st = memory_stats(idx)

    def mb(n):
        return f"{n / 2**20:12.2f} MiB"
    rows = [("Allocated memory", "allocated_bytes"), ("Active memory", "active_bytes"),
            ("Reserved memory", "reserved_bytes")]
    lines = [f"spyre:{idx} memory summary (limit {mb(st['limit_bytes']).strip()}, capacity "
             f"{mb(st['capacity_bytes']).strip()})", f"{'':<22}{'current':>16}{'peak':>16}"]
    lines += [f"{label:<22}{mb(st[k + '.all.current']):>16}{mb(st[k + '.all.peak']):>16}" for label, k in rows]
    lines.append(f"{'Cached free blocks':<22}{mb(st['inactive_split_bytes.all.current']):>16}")
    lines.append(f"{'Live allocations':<22}{st['allocation.all.current']:>16}")
    return "\n".join(lines)


# --- random numbers ---------------------------------------------------------------------------
# Each device has a default generator; ops on spyre that draw random numbers without an explicit
# generator draw from it (through the CPU kernels). torch.manual_seed seeds them all.
#
# Dynamo must not trace these functions: it treats torch.cuda's (torch.cuda.get_rng_state, ...) as
# opaque calls with a graph break, but would inline these. PyTorch's own freeze_rng_state saves and
# restores the current accelerator's state inside a compiled function (the OpInfo seed wrapper), under
# no_dispatch(), where tracing `Generator.set_state` fails, on every device once spyre is the
# accelerator. torch._disable_dynamo gives them torch.cuda's treatment without importing Dynamo here.
def _gen(device=None) -> torch.Generator:
    return default_generators[_index(device)]


@torch._disable_dynamo
def manual_seed(seed: int) -> None:
    _gen().manual_seed(int(seed))


@torch._disable_dynamo
def manual_seed_all(seed: int) -> None:
    _check()
    for g in default_generators:
        g.manual_seed(int(seed))


@torch._disable_dynamo
def seed() -> None:
    _gen().seed()


@torch._disable_dynamo
def seed_all() -> None:
    _check()
    s = _gen().seed()
    for g in default_generators:
        g.manual_seed(s)


@torch._disable_dynamo
def initial_seed() -> int:
    return _gen().initial_seed()


@torch._disable_dynamo
def get_rng_state(device="spyre") -> torch.Tensor:
    return _gen(device).get_state()


@torch._disable_dynamo
def set_rng_state(new_state: torch.Tensor, device="spyre") -> None:
    _gen(device).set_state(new_state)


@torch._disable_dynamo
def get_rng_state_all() -> list[torch.Tensor]:
    _check()
    return [g.get_state() for g in default_generators]


@torch._disable_dynamo
def set_rng_state_all(new_states) -> None:
    _check()
    for g, s in zip(default_generators, new_states):
        g.set_state(s)


# --- streams and events -----------------------------------------------------------------------
# One in-order stream (index 0) per device; events complete when recorded and carry host time.
Stream = torch.Stream
Event = torch.Event


def current_stream(device=None) -> torch.Stream:
    return torch.Stream(device=torch.device("spyre", _index(device)))


default_stream = current_stream


def set_stream(stream) -> None:
    pass


class stream:
    """Context manager selecting a stream: there is only one per device, so it does nothing."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


# --- autocast ---------------------------------------------------------------------------------
def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# --- CPU fallback statistics ------------------------------------------------------------------
def fallback_counts(overloads: bool = False) -> dict[str, int]:
    """How many times each operator ran on the host through the CPU fallback, e.g.
    {"aten::mm": 3}. With overloads=True the keys name the overload ("aten::add.Tensor")."""
    _check()
    counts = _C.fallback_counts()
    if overloads:
        return counts
    out: dict[str, int] = {}
    for k, v in counts.items():
        name = k.split(".", 1)[0]
        out[name] = out.get(name, 0) + v
    return out


def reset_fallback_counts() -> None:
    _check()
    _C.reset_fallback_counts()


# launch graphs (torch.cuda.graph / CUDAGraph / make_graphed_callables): spyre_triton/graphs.py
from spyre_triton.graphs import SpyreGraph, graph  # noqa: E402
from spyre_triton.graphs import make_graphed_callable as make_graphed_callables  # noqa: E402
