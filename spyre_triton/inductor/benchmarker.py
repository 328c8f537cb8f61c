"""Inductor's benchmarker for spyre: autotuning ranks choices by modelled device time (or host
wall time), not through the CUDA default."""
from __future__ import annotations

import time
from typing import Any, Callable

from .device import DEVICE


# Timed runs per benchmark at most: the simulator's run time is stable to a few percent, and
# every compiled graph benchmarks the configs of its reductions (and, under max-autotune, of its
# templates) on first use, so each run saved shortens compilation.
BENCHMARK_MAX_RUNS = 5


def _spyre_benchmark(self, fn: Callable[[], Any], *, warmup: int, rep: int,
                     is_vetted_benchmarking: bool = False, **kwargs) -> float:
    """The time in ms of `fn` on a Spyre card, as the performance model puts it (docs/perf-model.md),
    after one warm-up run. With SPYRE_BENCH=wall: the median host wall time of up to
    BENCHMARK_MAX_RUNS runs or about `rep` ms, whichever ends first.

    Launches on spyre run to completion before they return, so host time is device time (of the
    simulator). Unlike Inductor's GPU benchmarker there is no cache to flush between runs."""
    import statistics

    import torch
    from torch._inductor.runtime.benchmarking import may_ban_benchmarking
    if not is_vetted_benchmarking:
        may_ban_benchmarking()  # Inductor's deterministic mode allows only vetted benchmarking
    sync = torch.spyre.synchronize
    fn()
    sync()
    from spyre_triton.perf import modeled_ms, use_modeled  # rank choices by modelled device time
    if use_modeled() and (ms := modeled_ms(fn)) is not None:
        return ms
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        sync()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        if len(times) >= BENCHMARK_MAX_RUNS or (t1 - start) * 1e3 >= rep:
            return statistics.median(times)


def _register_benchmarker(mod) -> None:
    mod.register_benchmarker(DEVICE, _spyre_benchmark, override=True)
