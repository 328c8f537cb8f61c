"""Where compute ran: kernels launched on spyre and eager ops that fell back to the host.

    with spyre_triton.track() as t:
        model(x)
    print(t.table())          # kernels on spyre with launch counts and host time; host fallbacks
    t.kernels, t.fallbacks    # {name: count}
"""
from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

_active: list["Tracker"] = []


class Tracker:
    def __init__(self):
        self.kernels: Counter = Counter()
        self.kernel_ns: Counter = Counter()
        self.fallbacks: Counter = Counter()
        self._fallback_start: dict = {}

    def table(self) -> str:
        w = max([48] + [len(k) for k in self.kernels] + [len(k) for k in self.fallbacks])
        lines = [f"{'kernel on spyre':<{w}} {'launches':>9} {'host ms':>9}"]
        for name, n in self.kernels.most_common():
            lines.append(f"{name:<{w}} {n:>9} {self.kernel_ns[name] / 1e6:>9.2f}")
        if not self.kernels:
            lines.append("(none)")
        lines.append("")
        lines.append(f"{'op that fell back to the host CPU':<{w}} {'calls':>9}")
        for name, n in self.fallbacks.most_common():
            lines.append(f"{name:<{w}} {n:>9}")
        if not self.fallbacks:
            lines.append("(none)")
        return "\n".join(lines)


def record_launch(name: str, ns: int) -> None:
    for t in _active:
        t.kernels[name] += 1
        t.kernel_ns[name] += ns


def _fallback_counts() -> dict:
    import torch
    mod = getattr(torch, "spyre", None)
    return dict(mod.fallback_counts()) if mod is not None and hasattr(mod, "fallback_counts") else {}


@contextmanager
def track():
    t = Tracker()
    start = _fallback_counts()
    _active.append(t)
    try:
        yield t
    finally:
        _active.remove(t)
        end = _fallback_counts()
        for k, v in end.items():
            if v - start.get(k, 0) > 0:
                t.fallbacks[k] = v - start.get(k, 0)


def now_ns() -> int:
    return time.perf_counter_ns()
