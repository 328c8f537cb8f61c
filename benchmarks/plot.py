"""The figure and the table of a benchmark run, from the JSON that `run.py --json` writes.

    python benchmarks/run.py --json > benchmarks/results/latest.json
    python benchmarks/plot.py benchmarks/results/latest.json --svg benchmarks/results/latest.svg --markdown

The SVG has one bar per judged kernel and model: spyre's time relative to its CPU reference (torch
eager for kernels, Inductor's CPU backend for models; 1 thread, CPU time), with the target's limit
marked on each bar. Lower is better; a bar is green when its target is met. `--markdown` prints the
run's summary (every figure against its target) as the table README.md shows. A small SVG writer,
not matplotlib, so the plot needs nothing beyond the standard library.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the runner's own definitions of each figure and target)

# the limit of each target kind, as "spyre time / reference time" (matmul: >= 50% of torch.mm's rate)
LIMIT = {"memory": 1.5, "matmul": 2.0, "model": 2.0}


def bars(results: dict) -> list:
    """(label, spyre time / reference time, limit) per judged kernel and model."""
    out = []
    k = results.get("kernels")
    if k:
        th = str(k["threads"][0])
        for row in k["rows"]:
            if row["info"]:
                continue
            kind, v, _ = run.kernel_verdict(row, th)
            out.append((row["kernel"], 1 / v if kind == "matmul" else v, LIMIT[kind]))
    models = (results.get("models") or {}).get("models", {})
    for name, m in models.items():
        out.append((f"{name} (compiled)", run.model_figures(m)["vs_inductor_cpu"], LIMIT["model"]))
    return out


def svg(results: dict) -> str:
    rows = bars(results)
    m = results["machine"]
    left, right, top, bar_h, gap = 150, 30, 56, 18, 8
    width = 640
    height = top + len(rows) * (bar_h + gap) + 40
    scale = max([v for _, v, _ in rows] + [lim for *_, lim in rows]) * 1.1
    x = lambda v: left + (width - left - right) * v / scale  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="14">spyre time / CPU reference (1 thread, CPU time; '
           f'lower is better)</text>',
           f'<text x="10" y="38" fill="#555">{m["date"]}, {results.get("mode", "?")} run at {m["commit"]}, '
           f'{esc(m["cpu"])}, {m["cpus"]} CPUs, load {load(results)}</text>']
    for i, (label, v, lim) in enumerate(rows):
        y = top + i * (bar_h + gap)
        color = "#4c9a2a" if v <= lim else "#c0392b"
        out += [f'<text x="{left - 6}" y="{y + bar_h - 5}" text-anchor="end">{esc(label)}</text>',
                f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar_h}" fill="{color}"/>',
                f'<text x="{x(v) + 4:.1f}" y="{y + bar_h - 5}">{v:.2f}x</text>',
                f'<line x1="{x(lim):.1f}" x2="{x(lim):.1f}" y1="{y - 2}" y2="{y + bar_h + 2}" '
                f'stroke="black" stroke-dasharray="3,2"/>']
    axis_y = top + len(rows) * (bar_h + gap)
    out.append(f'<line x1="{left}" x2="{left}" y1="{top - 4}" y2="{axis_y}" stroke="black"/>')
    out.append(f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="{top - 4}" y2="{axis_y}" stroke="#999"/>')
    out.append(f'<text x="{x(1):.1f}" y="{axis_y + 14}" text-anchor="middle" fill="#555">1x</text>')
    out.append(f'<text x="10" y="{axis_y + 30}" fill="#555">dashed: the target\'s limit '
               f'(kernels 1.5x torch, matmul 50% of torch.mm\'s rate, models 2x Inductor CPU)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def load(results: dict) -> str:
    """The 1-minute load average at the run's start, which says how much of the machine it had."""
    start = results.get("load_start") or ["?"]
    return str(start[0])


def esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown(results: dict) -> str:
    lines = ["| figure | measured | target | met |", "|---|---|---|---|"]
    for r in results["summary"]:
        lines.append(f"| {r['figure']} | {r['measured']} | {r['target']} | {r['met']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="the output of `run.py --json`")
    ap.add_argument("--svg", help="write the plot here")
    ap.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table")
    opts = ap.parse_args(argv)
    with open(opts.json) as f:
        results = json.load(f)
    if opts.svg:
        with open(opts.svg, "w") as f:
            f.write(svg(results))
    if opts.markdown:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
