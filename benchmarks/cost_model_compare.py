"""Our performance model beside IBM torch-spyre's matmul cost model, over a sweep of mm and bmm shapes.

    python benchmarks/cost_model_compare.py                        # the sweep of docs/perf-model.md
    python benchmarks/cost_model_compare.py --quick                # a few shapes
    python benchmarks/cost_model_compare.py --json R.json --svg R.svg --markdown

IBM's side is the formula of torch-spyre's work-division planner (`_matmul_split_cost` in
`torch_spyre/_inductor/work_division.py`, documented in its `docs/source/compiler/work_division_planning.md`),
re-expressed here from its published figures: for [B,M,K] @ [B,K,N] in fp16 on `cores` cores split
b x m x n x k ways (N and K split by 64-element sticks),

    compute = B·M·N·K / (b·m·n·k) / (98.304e12 / 2 / 32 MAC/s per core · pt_eff)
              pt_eff = min(1, sqrt(max(1, (M/m) / 8) / 8))          8 PE rows, 8 passes keep the array full
    hbm     = 2 bytes · (B·M·K + B·K·N + B·M·N) / 204.8 GB/s · max(1, max(m, n) / 8)
    psum    = (k − 1) · B·M·N · 1.4e-4 µs                             K-split partial sums over the ring
    tie     = 50 µs · |log2(m / target_m)|,  target_m = max(4, min(cores/2, max(1, M / 64)))
    time    = (compute + hbm + psum + tie) · b^1.4                     batch split fitted to bmm sweeps

minimised over the splits, as the planner does. `tie` is the planner's tie-break, which the formula adds to
its time; the table shows the time with and without it. Ours is the modelled device time
(`spyre_triton.profile()`) of the Triton kernels Inductor emits for `torch.mm` / `torch.bmm` on spyre, run in
the simulator: the sweep keeps each problem to at most 2^33 multiply-adds so it runs in seconds.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time

# --- IBM's formula (figures from torch-spyre work_division.py) ----------------------------------------
IBM = {
    "peak_macs_per_us_core": 98.304e12 / 2 / 32 / 1e6,  # DL16 peak / 32 cores
    "hbm_gb_s": 204.8,          # LPDDR5 aggregate peak
    "dtype_bytes": 2,           # fp16
    "pt_rows": 8,               # PE ("PT") rows per corelet
    "target_pt_passes": 8,      # passes that keep the PT pipeline full
    "psum_us_per_elem": 1.4e-4,  # per output element per K-split ring hop (fit)
    "cohort_limit": 8,          # cores sharing a broadcast before it contends
    "batch_split_exponent": 1.4,  # fit to bmm sweeps
    "target_m_penalty_us": 50.0,  # tie-break per log2 step
    "stick": 64,                # fp16 elements per 128-byte stick
}


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def ibm_split_cost(B, M, N, K, b, m, n, k, cores=32, p=IBM):
    """(time with the tie-break, time without it) in µs of one split, or None when infeasible."""
    used = b * m * n * k
    if used == 0 or used > cores:
        return None
    m_t = M // m if m else 1
    pt_passes = max(1.0, m_t / p["pt_rows"])
    pt_eff = min(1.0, (pt_passes / p["target_pt_passes"]) ** 0.5)
    compute = (B * M * N * K / used) / (p["peak_macs_per_us_core"] * pt_eff)
    bytes_total = (B * M * K + B * K * N + B * M * N) * p["dtype_bytes"]
    hbm = bytes_total / (p["hbm_gb_s"] * 1000) * max(1.0, max(m, n) / p["cohort_limit"])
    psum = max(0, k - 1) * (B * M * N) * p["psum_us_per_elem"]
    m_min = p["pt_rows"] // 2
    target_m = max(m_min, min(cores // 2, max(1, M // (p["target_pt_passes"] * p["pt_rows"]))))
    tie = abs(math.log2(max(1, m) / target_m)) * p["target_m_penalty_us"]
    scale = b ** p["batch_split_exponent"]
    return (compute + hbm + psum + tie) * scale, (compute + hbm + psum) * scale, {
        "compute_us": compute * scale, "hbm_us": hbm * scale, "psum_us": psum * scale}


def ibm_cost(B, M, N, K, cores=32, p=IBM) -> dict:
    """The planner's choice: the split of least time (tie-break included)."""
    best = None
    sticks_n, sticks_k = max(1, N // p["stick"]), max(1, K // p["stick"])
    for b, m, n, k in itertools.product(_divisors(B), _divisors(M), _divisors(sticks_n), _divisors(sticks_k)):
        got = ibm_split_cost(B, M, N, K, b, m, n, k, cores, p)
        if got is not None and (best is None or got[0] < best["us"]):
            best = {"us": got[0], "us_no_tie": got[1], "split": (b, m, n, k), **got[2]}
    return best


# --- ours ----------------------------------------------------------------------------------------------
def ours(B, M, N, K, cache: dict) -> dict:
    import torch

    import spyre_triton
    # a fresh static compilation per shape: reusing one compiled function would, after a few shapes, make
    # Dynamo recompile with dynamic sizes, whose kernels are not the ones Inductor emits for a fixed shape
    torch._dynamo.reset()
    f = torch.compile(torch.bmm if B > 1 else torch.mm, dynamic=False)
    g = torch.Generator().manual_seed(0)
    shape_a, shape_b = ((B, M, K), (B, K, N)) if B > 1 else ((M, K), (K, N))
    a = torch.randn(shape_a, generator=g, dtype=torch.float16).to("spyre")
    b = torch.randn(shape_b, generator=g, dtype=torch.float16).to("spyre")
    f(a, b)  # compile (and Inductor's choice of block sizes)
    t0 = time.perf_counter()
    with spyre_triton.profile() as prof:
        f(a, b)
    host = time.perf_counter() - t0
    recs = prof.kernels
    return {"us": prof.modeled_ns / 1e3, "kernels": [r.name for r in recs], "grid": [list(r.grid) for r in recs],
            "bottleneck": [r.bottleneck for r in recs], "dma_bytes": sum(r.dma_bytes for r in recs),
            "pe_fraction": max((r.pe_fraction for r in recs), default=0.0), "host_s": host}


def sweep(quick: bool) -> list:
    sizes = [64, 512, 2048, 8192] if not quick else [64, 512, 2048]
    shapes = [(1, M, N, K) for M in sizes for N in sizes for K in sizes if M * N * K <= 1 << 33]
    batches = [1, 8, 64] if not quick else [8]
    inner = [64, 256, 512] if not quick else [128]
    shapes += [(B, s, s, s) for B in batches if B > 1 for s in inner if B * s ** 3 <= 1 << 33]
    shapes += [(B, 128, 128, 64) for B in (2, 16, 32, 64)] if not quick else []
    return shapes


def run(quick: bool, cores: int = 32, limit_macs: int = 1 << 33) -> list:
    rows = []
    cache: dict = {}  # unused: each shape compiles on its own (see ours())
    for B, M, N, K in sweep(quick):
        ibm = ibm_cost(B, M, N, K, cores)
        row = {"B": B, "M": M, "N": N, "K": K, "macs": B * M * N * K, "ibm": ibm}
        if B * M * N * K <= limit_macs:
            row["ours"] = ours(B, M, N, K, cache)
            row["ratio"] = row["ours"]["us"] / ibm["us"]
            row["ratio_no_tie"] = row["ours"]["us"] / ibm["us_no_tie"]
        rows.append(row)
        print(f"B={B:3d} M={M:5d} N={N:5d} K={K:5d}  IBM {ibm['us']:10.1f} us ({ibm['us_no_tie']:9.1f} without "
              f"tie-break) split b,m,n,k={ibm['split']}  ours "
              + (f"{row['ours']['us']:10.1f} us {row['ours']['bottleneck']}" if "ours" in row else "-"), flush=True)
    return rows


# --- outputs -------------------------------------------------------------------------------------------
def markdown(rows: list) -> str:
    out = ["| B | M | N | K | IBM formula µs (no tie-break) | IBM split b·m·n·k | ours µs | ours / IBM | our bottleneck |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        i = r["ibm"]
        o = r.get("ours")
        out.append(f"| {r['B']} | {r['M']} | {r['N']} | {r['K']} | {i['us']:.1f} ({i['us_no_tie']:.1f}) | "
                   f"{'·'.join(map(str, i['split']))} | " +
                   (f"{o['us']:.1f} | {r['ratio']:.2f} | {', '.join(sorted(set(o['bottleneck'])))} |" if o else "- | - | - |"))
    return "\n".join(out)


def summary(rows: list) -> str:
    """How often and by how much the two disagree."""
    both = [r for r in rows if "ours" in r]
    if not both:
        return "no shape was simulated"
    ratios = sorted(r["ratio"] for r in both)
    within = sum(1 for x in ratios if 0.75 <= x <= 1.25)
    med = ratios[len(ratios) // 2]
    bott = {}
    for r in both:
        for b in set(r["ours"]["bottleneck"]):
            bott[b] = bott.get(b, 0) + 1
    return (f"{len(both)} shapes simulated: ours / IBM from {ratios[0]:.2f} to {ratios[-1]:.2f}, median {med:.2f}; "
            f"{within} within 25%; our bottlenecks: " + ", ".join(f"{k} {v}" for k, v in sorted(bott.items())))


def svg(rows: list, width=560, height=460) -> str:
    """Log-log scatter: IBM's time (x) against ours (y), y = x and the ±25% band."""
    pts = [(r["ibm"]["us"], r["ours"]["us"], r["B"] > 1) for r in rows if "ours" in r]
    lo = min(min(x, y) for x, y, _ in pts) / 1.5
    hi = max(max(x, y) for x, y, _ in pts) * 1.5
    L, R, T, Bm = 70, 20, 30, 55
    W, H = width - L - R, height - T - Bm

    def px(v):
        return L + W * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    def py(v):
        return T + H - H * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
         f'font-size="12">', f'<rect x="{L}" y="{T}" width="{W}" height="{H}" fill="white" stroke="#444"/>']
    for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi)) + 1):
        v = 10.0 ** e
        s.append(f'<line x1="{px(v):.1f}" y1="{T}" x2="{px(v):.1f}" y2="{T + H}" stroke="#ddd"/>')
        s.append(f'<line x1="{L}" y1="{py(v):.1f}" x2="{L + W}" y2="{py(v):.1f}" stroke="#ddd"/>')
        s.append(f'<text x="{px(v):.1f}" y="{T + H + 16}" text-anchor="middle">{v:g}</text>')
        s.append(f'<text x="{L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for f, dash in ((1.0, ""), (1.25, ' stroke-dasharray="4 3"'), (0.75, ' stroke-dasharray="4 3"')):
        s.append(f'<line x1="{px(lo):.1f}" y1="{py(lo * f):.1f}" x2="{px(hi / max(f, 1)):.1f}" '
                 f'y2="{py(hi / max(f, 1) * f):.1f}" stroke="#888"{dash}/>')
    for x, y, batched in pts:
        color = "#d62728" if batched else "#1f77b4"
        s.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{color}" fill-opacity="0.75"/>')
    s.append(f'<text x="{L + W / 2}" y="{height - 12}" text-anchor="middle">IBM torch-spyre formula (µs)</text>')
    s.append(f'<text x="16" y="{T + H / 2}" text-anchor="middle" transform="rotate(-90 16 {T + H / 2})">'
             'our model, Inductor\'s Triton kernels (µs)</text>')
    s.append(f'<text x="{L + 8}" y="{T + 16}" fill="#1f77b4">● mm</text>'
             f'<text x="{L + 60}" y="{T + 16}" fill="#d62728">● bmm</text>'
             f'<text x="{L + 118}" y="{T + 16}" fill="#666">— equal, - - ±25%</text>')
    s.append("</svg>")
    return "\n".join(s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few shapes")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--svg", help="write the scatter plot")
    ap.add_argument("--markdown", action="store_true", help="print the markdown table")
    ap.add_argument("--ibm-only", action="store_true", help="only evaluate IBM's formula (no simulation)")
    a = ap.parse_args(argv)
    rows = run(a.quick, limit_macs=0 if a.ibm_only else 1 << 33)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ibm_figures": IBM, "rows": rows}, f, indent=1)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(rows))
    if a.markdown:
        print(markdown(rows))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
