"""`spyre_triton.profile()`: model every kernel launched on spyre inside a `with` block.

    with spyre_triton.profile() as prof:
        out = model(x)                    # @triton.jit launches and compiled models alike
    print(prof.table())                   # per kernel, sorted by modelled device time
    prof.kernels                          # one LaunchRecord per launch
    prof.export_chrome_trace("t.json")    # one track per modelled core (Perfetto, chrome://tracing)
    prof.comms                            # one CommRecord per collective or send/recv (card-to-card links)
    prof.roofline("roofline.png")         # needs matplotlib
"""
from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from contextlib import contextmanager

from . import capture, comm
from .hardware import HardwareConfig, get_hardware, set_hardware


class Profile:
    """The launches modelled while it was active (`kernels`), and views of them."""

    def __init__(self, detail: bool = False, trace_programs: int | None = None, trace_events: int = 4096,
                 sensitivity=False, sensitivity_step: float = 0.25):
        # detail: also record each instruction's timing for the first programs (trace units)
        self.kernels: list = []
        self.comms: list = []     # card-to-card transfers (comm.CommRecord)
        self._timeline: list = []  # kernels and transfers in the order they ran
        self.trace_programs = (trace_programs if trace_programs is not None else 64) if detail else 0
        self.trace_events = trace_events if detail else 0
        # sensitivity: each launch also runs once per figure and direction, modelled with that figure
        # x (1 -/+ step) (capture.sensitivity); True: capture.SENSITIVITY_FIGURES
        if sensitivity is True:
            figs = capture.SENSITIVITY_FIGURES
        else:
            figs = tuple(sensitivity or ())
        from .hardware import HardwareConfig as _HC
        known = {f.name for f in dataclasses.fields(_HC)}
        bad = [f for f in figs if f not in known or not isinstance(getattr(get_hardware(), f), (int, float))
               or isinstance(getattr(get_hardware(), f), bool)]
        if bad:
            raise ValueError(f"profile(sensitivity=...): {bad} are not numeric HardwareConfig fields")
        if not 0 < sensitivity_step < 1:
            raise ValueError(f"profile(sensitivity_step={sensitivity_step}): must be in (0, 1)")
        self.sensitivity_figures = figs
        self.sensitivity_step = sensitivity_step

    def _add(self, rec) -> None:
        self.kernels.append(rec)
        self._timeline.append(rec)

    def _add_comm(self, rec) -> None:
        self.comms.append(rec)
        self._timeline.append(rec)

    # --- totals ------------------------------------------------------------------------------------
    @property
    def modeled_ns(self) -> float:
        """Modelled device time of every launch, back to back."""
        return sum(r.modeled_ns for r in self.kernels)

    @property
    def comm_ns(self) -> float:
        """Modelled time of the card-to-card transfers (collectives, sends and receives), back to back."""
        return sum(c.modeled_ns for c in self.comms)

    def sensitivity(self) -> "OrderedDict[str, dict]":
        """Per HardwareConfig figure: the total modelled time with it x (1 - step) and x (1 + step), and the
        change against the total, largest change first (profile(sensitivity=True))."""
        if not self.sensitivity_figures:
            raise RuntimeError("sensitivity(): the profile was not taken with sensitivity=True")
        base = self.modeled_ns
        lo, hi = 1.0 - self.sensitivity_step, 1.0 + self.sensitivity_step
        out = {}
        for fig in self.sensitivity_figures:
            t_lo = sum(r.sensitivity.get((fig, lo), r.modeled_ns) for r in self.kernels)
            t_hi = sum(r.sensitivity.get((fig, hi), r.modeled_ns) for r in self.kernels)
            out[fig] = {"value": getattr(self.kernels[0].hw if self.kernels else get_hardware(), fig),
                        "low_ns": t_lo, "high_ns": t_hi,
                        "low_change": (t_lo - base) / base if base else 0.0,
                        "high_change": (t_hi - base) / base if base else 0.0}
        return OrderedDict(sorted(out.items(), key=lambda kv: -max(abs(kv[1]["low_change"]),
                                                                   abs(kv[1]["high_change"]))))

    def sensitivity_table(self) -> str:
        """sensitivity() as text: how the total moves when each figure is off by the step."""
        pct = round(100 * self.sensitivity_step)
        head = f"{'figure':<24} {'value':>12} {'-' + str(pct) + '%: us':>13} {'change':>8} {'+' + str(pct) + '%: us':>13} {'change':>8}"
        lines = [f"total {self.modeled_ns / 1e3:.2f} us modelled; each figure of the card x {1 - self.sensitivity_step:g} "
                 f"and x {1 + self.sensitivity_step:g} alone", head, "-" * len(head)]
        for fig, a in self.sensitivity().items():
            lines.append(f"{fig:<24} {a['value']:>12.4g} {a['low_ns'] / 1e3:>13.2f} {100 * a['low_change']:>+7.1f}% "
                         f"{a['high_ns'] / 1e3:>13.2f} {100 * a['high_change']:>+7.1f}%")
        return "\n".join(lines)

    def by_transfer(self) -> "OrderedDict[str, dict]":
        """Per transfer name: count, bytes and modelled time, largest first."""
        agg: dict = {}
        for c in self.comms:
            a = agg.setdefault(c.name, {"count": 0, "bytes": 0, "modeled_ns": 0.0, "wall_ns": 0, "world": c.world})
            a["count"] += 1
            a["bytes"] += c.nbytes
            a["modeled_ns"] += c.modeled_ns
            a["wall_ns"] += c.wall_ns
        return OrderedDict(sorted(agg.items(), key=lambda kv: -kv[1]["modeled_ns"]))

    @property
    def wall_ns(self) -> int:
        return sum(r.wall_ns for r in self.kernels)

    def by_kernel(self) -> "OrderedDict[str, dict]":
        """Per kernel name: launches and totals, sorted by modelled time (largest first)."""
        agg: dict = {}
        for r in self.kernels:
            a = agg.setdefault(r.name, {"launches": 0, "modeled_ns": 0.0, "wall_ns": 0, "dma_bytes": 0, "flops": 0,
                                        "macs": 0, "max_cycles": 0.0, "mean_cycles": 0.0, "lx_bytes": 0,
                                        "bottlenecks": {}, "pe_time": 0.0, "hw": r.hw,
                                        "util_mean": 0.0, "util_min": 1.0, "util_max": 0.0, "cores_used": 0,
                                        "dma_cycles": 0.0, "compute_cycles": 0.0, "overlap_cycles": 0.0,
                                        "core_bytes_max": 0.0, "core_bytes_mean": 0.0, "lx_peak": (0, None),
                                        "lx_peak_source": "", "ring_bytes": 0, "ring_cycles": 0.0,
                                        "span_cycles": 0.0})
            a["launches"] += 1
            a["modeled_ns"] += r.modeled_ns
            a["wall_ns"] += r.wall_ns
            a["dma_bytes"] += r.dma_bytes
            a["flops"] += r.flops
            a["macs"] += r.macs
            a["max_cycles"] += r.max_cycles
            a["mean_cycles"] += r.mean_cycles
            a["lx_bytes"] = max(a["lx_bytes"], r.lx_bytes)
            a["bottlenecks"][r.bottleneck] = a["bottlenecks"].get(r.bottleneck, 0.0) + r.modeled_ns
            _add_card(a, r)
        for a in agg.values():
            n = a["launches"]
            a["max_cycles"] /= n
            a["mean_cycles"] /= n
            a["util_mean"] /= n
            a["core_bytes_mean"] /= n
            shorter = min(a["dma_cycles"], a["compute_cycles"])
            a["overlap"] = a["overlap_cycles"] / shorter if shorter > 0 else 0.0
            a["ring_utilisation"] = a["ring_cycles"] / a["span_cycles"] if a["span_cycles"] else 0.0
            a["bottleneck"] = max(a["bottlenecks"], key=a["bottlenecks"].get)
            secs = a["modeled_ns"] * 1e-9
            hw = a["hw"]
            a["pe_fraction"] = 2 * a["macs"] / secs / hw.peak_flops if secs else 0.0
            a["dma_fraction"] = a["dma_bytes"] / secs / hw.dram_read_bw if secs else 0.0
        return OrderedDict(sorted(agg.items(), key=lambda kv: -kv[1]["modeled_ns"]))

    def table(self, top: int | None = None) -> str:
        """The per-kernel summary, sorted by modelled device time."""
        agg = self.by_kernel()
        total = self.modeled_ns or 1.0
        w = max([len("kernel")] + [min(len(k), 48) for k in agg])
        head = (f"{'kernel':<{w}} {'launches':>8} {'model us':>10} {'%':>5} {'us/launch':>10} "
                f"{'cycles/core max/mean':>21} {'DMA MB':>9} {'GFLOP':>8} {'PE%':>5} {'DMA%':>5} {'LX KB':>6} "
                f"{'bottleneck':<10} {'host ms':>8}")
        lines = [head, "-" * len(head)]
        for i, (name, a) in enumerate(agg.items()):
            if top is not None and i >= top:
                lines.append(f"... {len(agg) - top} more kernels")
                break
            shown = name if len(name) <= 48 else name[:45] + "..."
            lines.append(
                f"{shown:<{w}} {a['launches']:>8} {a['modeled_ns'] / 1e3:>10.2f} "
                f"{100 * a['modeled_ns'] / total:>5.1f} {a['modeled_ns'] / 1e3 / a['launches']:>10.2f} "
                f"{a['max_cycles']:>10.0f}/{a['mean_cycles']:<10.0f} {a['dma_bytes'] / 1e6:>9.3f} "
                f"{a['flops'] / 1e9:>8.3f} {100 * a['pe_fraction']:>5.1f} {100 * a['dma_fraction']:>5.1f} "
                f"{a['lx_bytes'] / 1024:>6.1f} {a['bottleneck']:<10} {a['wall_ns'] / 1e6:>8.2f}")
        if not agg:
            lines.append("(no kernel launched on spyre)")
        lines.append("-" * len(head))
        hw = self.kernels[0].hw if self.kernels else get_hardware()
        lines.append(f"{len(self.kernels)} launches: {self.modeled_ns / 1e3:.2f} us modelled on the card "
                     f"({hw.describe()}); {self.wall_ns / 1e6:.2f} ms on the host")
        if agg:
            lines += ["", self.card_table(top), self._ring_line(agg)]
        if self.sensitivity_figures and self.kernels:
            lines += ["", self.sensitivity_table()]
        if self.comms:
            lines += ["", f"{'transfer (card to card)':<24} {'count':>6} {'MB':>10} {'model us':>10} {'ranks':>6} "
                          f"{'host ms':>8}"]
            for name, a in self.by_transfer().items():
                lines.append(f"{name:<24} {a['count']:>6} {a['bytes'] / 1e6:>10.3f} {a['modeled_ns'] / 1e3:>10.2f} "
                             f"{a['world']:>6} {a['wall_ns'] / 1e6:>8.2f}")
            lines.append(f"{len(self.comms)} transfers: {self.comm_ns / 1e3:.2f} us modelled on links of "
                         f"{hw.link_bw / 1e9:.0f} GB/s, {hw.link_latency_ns / 1e3:.1f} us latency ({hw.link_topology})")
        return "\n".join(lines)

    @staticmethod
    def _ring_line(agg: dict) -> str:
        """On-chip traffic in total, beside the card-to-card transfers that follow it in table()."""
        ring = sum(a["ring_bytes"] for a in agg.values())
        busy, span = sum(a["ring_cycles"] for a in agg.values()), sum(a["span_cycles"] for a in agg.values())
        return (f"on-chip ring (DRAM <-> LX): {ring / 1e6:.3f} MB, {100 * busy / span if span else 0.0:.1f}% of "
                f"its bandwidth over the kernels' time")

    def card_table(self, top: int | None = None) -> str:
        """The metrics card per kernel: how busy the modelled cores were (mean, least and most busy of the
        cores that ran programs), how much DMA and compute overlapped, the bytes the busiest core moved,
        the LX peak of a program with the source line where it is reached, and the kernel's traffic over the
        on-chip ring with the ring's utilisation (docs/perf-model.md, "The on-chip ring")."""
        agg = self.by_kernel()
        w = max([len("kernel")] + [min(len(k), 48) for k in agg])
        head = (f"{'kernel':<{w}} {'cores':>5} {'util% mean/min/max':>19} {'DMA||compute%':>13} "
                f"{'MB/core max/mean':>17} {'ring MB':>9} {'ring%':>5} {'LX peak KB':>10}  at")
        lines = ["per-core metrics (modelled)", head, "-" * len(head)]
        for i, (name, a) in enumerate(agg.items()):
            if top is not None and i >= top:
                lines.append(f"... {len(agg) - top} more kernels")
                break
            shown = name if len(name) <= 48 else name[:45] + "..."
            util = f"{100 * a['util_mean']:.0f}/{100 * a['util_min']:.0f}/{100 * a['util_max']:.0f}"
            mb = f"{a['core_bytes_max'] / 1e6:.3f}/{a['core_bytes_mean'] / 1e6:.3f}"
            lines.append(f"{shown:<{w}} {a['cores_used']:>5} {util:>19} {100 * a['overlap']:>13.0f} {mb:>17} "
                         f"{a['ring_bytes'] / 1e6:>9.3f} {100 * a['ring_utilisation']:>5.1f} "
                         f"{a['lx_peak'][0] / 1024:>10.1f}  {a['lx_peak_source']}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    # --- chrome trace ------------------------------------------------------------------------------
    def chrome_trace(self, max_programs: int = 200_000) -> dict:
        """The trace as a dict (see export_chrome_trace)."""
        ev = []
        card, units_pid = 1, 2
        hw = self.kernels[0].hw if self.kernels else get_hardware()
        ncores = max([len(r.cycles_per_core) for r in self.kernels] + [hw.num_cores])
        ev.append({"ph": "M", "name": "process_name", "pid": card, "args": {"name": "Spyre card (modelled)"}})
        ev.append({"ph": "M", "name": "process_sort_index", "pid": card, "args": {"sort_index": 0}})
        ev.append({"ph": "M", "name": "thread_name", "pid": card, "tid": 0, "args": {"name": "kernels"}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": card, "tid": 0, "args": {"sort_index": 0}})
        for c in range(ncores):
            ev.append({"ph": "M", "name": "thread_name", "pid": card, "tid": c + 1, "args": {"name": f"core {c}"}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": card, "tid": c + 1,
                       "args": {"sort_index": c + 1}})
        detail_tracks = set()
        t0 = 0.0  # us: launches and transfers back to back on the modelled clock
        shown = 0
        links_pid = 3
        if self.comms:
            ev.append({"ph": "M", "name": "process_name", "pid": links_pid, "args": {"name": "Card links (modelled)"}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": links_pid, "args": {"sort_index": 2}})
            ev.append({"ph": "M", "name": "thread_name", "pid": links_pid, "tid": 0,
                       "args": {"name": "collectives and peer-to-peer"}})
        li = -1
        for r in self._timeline:
            if isinstance(r, comm.CommRecord):
                dur = r.modeled_ns / 1e3
                ev.append({"ph": "X", "pid": links_pid, "tid": 0, "name": r.name, "ts": t0, "dur": dur,
                           "cat": "transfer", "args": {"bytes": r.nbytes, "ranks": r.world,
                                                        "modeled_us": round(dur, 4), "wall_us": r.wall_ns / 1e3}})
                t0 += dur
                continue
            li += 1
            us_per_cycle = 1e6 / r.hw.clock_hz
            dur = r.modeled_ns / 1e3
            ev.append({"ph": "X", "pid": card, "tid": 0, "name": r.name, "ts": t0, "dur": dur, "cat": "kernel",
                       "args": {"launch": li, "grid": list(r.grid), "bottleneck": r.bottleneck,
                                "modeled_us": round(dur, 4), "dma_bytes": r.dma_bytes, "flops": r.flops,
                                "pe_fraction": round(r.pe_fraction, 4), "dma_fraction": round(r.dma_fraction, 4),
                                "lx_bytes": r.lx_bytes, "wall_us": r.wall_ns / 1e3}})
            ev.extend(_card_counters(r, card, t0))
            g0, g1 = r.grid[0], r.grid[1]
            sched = r.schedule() if shown < max_programs else []
            starts = {}
            for p, core, start, cyc in sched:
                if shown >= max_programs:
                    break
                shown += 1
                starts[p] = (core, start)
                ev.append({"ph": "X", "pid": card, "tid": core + 1, "name": r.name, "cat": "program",
                           "ts": t0 + start * us_per_cycle, "dur": cyc * us_per_cycle,
                           "args": {"program": [p % g0, (p // g0) % g1, p // (g0 * g1)], "cycles": round(cyc, 1)}})
            for p, pc, unit, s, b, d in r.events():
                if p not in starts:
                    continue
                core, start = starts[p]
                if r.lx_profile:  # the program's LX occupancy as its instructions start
                    ev.append({"ph": "C", "pid": card, "name": f"LX bytes core {core}",
                               "ts": t0 + (start + s) * us_per_cycle, "args": {"bytes": r.lx_at(pc)}})
                tid = core * 8 + list(_unit_order()).index(unit) + 1
                detail_tracks.add((tid, core, unit))
                op, dt, file, line, text = r.insn_info(pc)
                args = {"pc": pc, "program": p, "done_us": round(t0 + (start + d) * us_per_cycle, 6)}
                if file:
                    args["source"] = f"{file}:{line}"
                    if text:
                        args["code"] = text.strip()
                ev.append({"ph": "X", "pid": units_pid, "tid": tid, "name": f"{op}.{dt}", "cat": unit,
                           "ts": t0 + (start + s) * us_per_cycle, "dur": max(b - s, 0.0) * us_per_cycle,
                           "args": args})
            t0 += dur
        if detail_tracks:
            ev.append({"ph": "M", "name": "process_name", "pid": units_pid,
                       "args": {"name": "Spyre units (traced programs)"}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": units_pid, "args": {"sort_index": 1}})
            for tid, core, unit in sorted(detail_tracks):
                ev.append({"ph": "M", "name": "thread_name", "pid": units_pid, "tid": tid,
                           "args": {"name": f"core {core} {unit}"}})
                ev.append({"ph": "M", "name": "thread_sort_index", "pid": units_pid, "tid": tid,
                           "args": {"sort_index": tid}})
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": {"model": "spyre_triton.perf", "hardware": hw.describe()}}

    def export_chrome_trace(self, path: str, max_programs: int = 200_000) -> str:
        """Writes a Chrome trace-event JSON file: the kernels on one track, each modelled core on its
        own track (its programs as slices), launches back to back on the modelled clock; with
        profile(detail=True) the traced programs' instructions on per-unit tracks as well. Opens in
        https://ui.perfetto.dev and chrome://tracing."""
        with open(path, "w") as f:
            json.dump(self.chrome_trace(max_programs), f)
        return path

    # --- roofline ----------------------------------------------------------------------------------
    def roofline(self, path: str, title: str | None = None) -> str:
        """Writes a roofline plot (PNG, or any format matplotlib infers from path): each kernel's
        achieved FLOP/s against its FLOPs per byte of device memory, under the PE, vector and
        device-memory ceilings of the modelled card. A bar through a kernel's point shows its cores'
        spread: the rate scaled by the least and the most busy core's utilisation over the mean.
        Needs matplotlib."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("Profile.roofline() needs matplotlib, an optional dependency: "
                              "pip install matplotlib") from e
        hw = self.kernels[0].hw if self.kernels else get_hardware()
        agg = self.by_kernel()
        fig, ax = plt.subplots(figsize=(8, 5.5))
        pts = []
        for name, a in agg.items():
            if a["flops"] <= 0 or a["modeled_ns"] <= 0:
                continue
            x = a["flops"] / a["dma_bytes"] if a["dma_bytes"] else None
            y = a["flops"] / (a["modeled_ns"] * 1e-9)
            spread = (a["util_min"] / a["util_mean"], a["util_max"] / a["util_mean"]) if a["util_mean"] else (1, 1)
            pts.append((name, x, y, a["modeled_ns"], spread))
        xs = [p[1] for p in pts if p[1]]
        lo = min(xs + [0.1]) / 4
        hi = max(xs + [hw.peak_flops / hw.dram_read_bw * 8])
        import math
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.loglog(grid, [min(hw.peak_flops, x * hw.dram_read_bw) for x in grid], "k-",
                  label=f"PE peak {hw.peak_flops / 1e12:.1f} TFLOP/s / DRAM {hw.dram_read_bw / 1e9:.0f} GB/s")
        ax.loglog(grid, [min(hw.vector_peak_flops, x * hw.dram_read_bw) for x in grid], "k--",
                  label=f"vector peak {hw.vector_peak_flops / 1e12:.2f} TFLOP/s")
        total = sum(p[3] for p in pts) or 1.0
        for name, x, y, ns, (lo_f, hi_f) in pts:
            x = x if x else hi
            size = 20 + 400 * ns / total
            ax.scatter([x], [y], s=size, alpha=0.7)
            if hi_f > lo_f:  # the cores' spread: the least and most busy core's share of the mean's rate
                ax.errorbar([x], [y], yerr=[[y * (1 - lo_f)], [y * (hi_f - 1)]], fmt="none", alpha=0.5,
                            capsize=3)
            ax.annotate(name if len(name) <= 32 else name[:29] + "...", (x, y), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("arithmetic intensity (FLOP per byte of device memory)")
        ax.set_ylabel("achieved FLOP/s (modelled)")
        ax.set_title(title or f"Roofline on the modelled Spyre card ({len(self.kernels)} launches)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        if pts:
            ax.set_ylim(bottom=max(min(p[2] for p in pts) / 10, 1.0), top=hw.peak_flops * 3)
        ax.set_xlim(lo, hi * 2 if math.isfinite(hi) else None)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


def _card_counters(r, pid: int, ts: float) -> list:
    """Counter tracks of launch r starting at ts: each core's utilisation and DMA megabytes, the
    launch's DMA/compute overlap, its megabytes over the on-chip ring and the ring's utilisation (all
    back to 0 at its end)."""
    end = ts + r.modeled_ns / 1e3
    util = {f"core {c}": round(100 * u, 2) for c, u in enumerate(r.core_utilisation)}
    moved = {f"core {c}": round(b / 1e6, 6) for c, b in enumerate(r.core_bytes)}
    out = []
    for name, at, args in (("core utilisation %", ts, util), ("DMA MB per core", ts, moved),
                           ("DMA/compute overlap %", ts, {"overlap": round(100 * r.overlap, 2)}),
                           ("ring MB (on-chip)", ts, {"ring": round(r.ring_bytes / 1e6, 6)}),
                           ("ring utilisation %", ts, {"ring": round(100 * r.ring_utilisation, 2)})):
        out.append({"ph": "C", "pid": pid, "name": name, "ts": at, "args": args})
        out.append({"ph": "C", "pid": pid, "name": name, "ts": end, "args": {k: 0 for k in args}})
    return out


def _add_card(a: dict, r) -> None:
    """Adds launch r's per-core metrics to kernel aggregate a (by_kernel)."""
    used = [u for u, c in zip(r.core_utilisation, r.cycles_per_core) if c > 0]
    a["cores_used"] = max(a["cores_used"], len(used))
    if used:
        a["util_mean"] += sum(used) / len(used)
        a["util_min"] = min(a["util_min"], min(used))
        a["util_max"] = max(a["util_max"], max(used))
    a["dma_cycles"] += sum(r.core_dma_cycles)
    a["compute_cycles"] += sum(r.core_compute_cycles)
    a["overlap_cycles"] += sum(r.core_overlap_cycles)
    moved = [b for b in r.core_bytes if b > 0]
    if moved:
        a["core_bytes_max"] = max(a["core_bytes_max"], max(moved))
        a["core_bytes_mean"] += sum(moved) / len(moved)
    a["ring_bytes"] += r.ring_bytes
    a["ring_cycles"] += r.ring_floor_cycles
    a["span_cycles"] += r.span_cycles
    peak = r.lx_peak
    if peak[0] > a["lx_peak"][0] or not a["lx_peak_source"]:
        a["lx_peak"] = peak
        a["lx_peak_source"] = r.lx_peak_source()


def _unit_order():
    from .model import unit_names
    return unit_names()


@contextmanager
def profile(detail: bool = False, hw: HardwareConfig | None = None, trace_programs: int | None = None,
            trace_events: int = 4096, sensitivity=False, sensitivity_step: float = 0.25):
    """Models every spyre kernel launched inside the block; yields the Profile.

    detail: also keep each instruction's modelled timing for the first `trace_programs` programs
    of every launch (default 64) for the per-unit tracks of the chrome trace.
    hw: the card to model (default: spyre_triton.get_hardware()).
    sensitivity: True (or a list of HardwareConfig field names) to report how the total changes with each
    assumed figure x (1 - sensitivity_step) and x (1 + sensitivity_step): `prof.sensitivity()`,
    `prof.sensitivity_table()`, and a section of `prof.table()`. Each launch then runs 2 x figures more
    times, each from the device memory its pointer arguments held before it ran, which is put back
    afterwards (docs/perf-model.md)."""
    prof = Profile(detail=detail, trace_programs=trace_programs, trace_events=trace_events,
                   sensitivity=sensitivity, sensitivity_step=sensitivity_step)
    prev = set_hardware(hw) if hw is not None else None
    capture.listeners.append(prof)
    comm.listeners.append(prof)
    comm.watch_peer_copies(True)
    try:
        yield prof
    finally:
        capture.listeners.remove(prof)
        comm.listeners.remove(prof)
        comm.watch_peer_copies(False)
        if prev is not None:
            set_hardware(prev)
