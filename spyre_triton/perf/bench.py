"""Benchmarking on modelled device time: what autotuning ranks configurations by on spyre.

`do_bench` has triton.testing.do_bench's signature. On the spyre backend it is the driver's
benchmarker (so @triton.autotune uses it) and replaces triton.testing.do_bench when the driver
starts. It runs `fn` once to warm up (compilation, nested autotuning), then once more with every
launch modelled, and returns the modelled device time of that run in ms: deterministic, so one
run is enough. `modeled_ms(fn)` is the same measurement for other benchmarkers (Inductor's).

SPYRE_BENCH=wall switches back to host wall time (Triton's own do_bench). A function that
launches nothing on spyre is timed on the host either way.
"""
from __future__ import annotations

import os

from . import capture

_wall = []  # Triton's do_bench, kept when ours replaces it


def use_modeled() -> bool:
    """False when SPYRE_BENCH=wall (or host): benchmarks time the host instead of the model."""
    return os.environ.get("SPYRE_BENCH", "model").strip().lower() not in ("wall", "host")


class _Collector:
    trace_programs = 0
    trace_events = 0

    def __init__(self):
        self.records = []

    def _add(self, rec):
        self.records.append(rec)


def modeled_ms(fn) -> float | None:
    """Runs fn once with the model on; the modelled device time of its spyre launches in ms, or
    None when it launched nothing on spyre."""
    c = _Collector()
    capture.listeners.append(c)
    try:
        fn()
    finally:
        capture.listeners.remove(c)
    if not c.records:
        return None
    return sum(r.modeled_ns for r in c.records) / 1e6


def wall_do_bench():
    """Triton's own (host wall-time) do_bench."""
    if _wall:
        return _wall[0]
    from triton.testing import do_bench as d
    return d if d is not do_bench else None


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """triton.testing.do_bench on modelled device time (see the module docstring)."""
    wall = wall_do_bench()
    if not use_modeled():
        return wall(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)
    fn()
    if grad_to_none is not None:
        for x in grad_to_none:
            x.grad = None
    ms = modeled_ms(fn)
    if ms is None:
        return wall(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, quantiles=quantiles,
                    return_mode=return_mode)
    from triton.testing import _summarize_statistics
    return _summarize_statistics([ms], quantiles, return_mode)


def install() -> None:
    """Make triton.testing.do_bench measure modelled time (the spyre driver calls this once)."""
    import triton.testing as tt
    if tt.do_bench is do_bench:
        return
    if not _wall:
        _wall.append(tt.do_bench)
    tt.do_bench = do_bench
