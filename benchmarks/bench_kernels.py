"""Side-by-side timings of Triton kernels on spyre against torch eager on the CPU and against Triton's
own interpreter (TRITON_INTERPRET=1, run in a subprocess at a size it can finish).

    python benchmarks/bench_kernels.py [--quick] [--json]

Prints ratios measured in this one run; the machine is shared and noisy, so only ratios are
meaningful, and only roughly.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_kernel_defs import inputs, run  # noqa: E402


def torch_op(name, x, y, out=None):
    """The same op in torch eager; with `out`, into a preallocated tensor as the kernel does (a fresh
    multi-megabyte result would cost torch page faults the kernel does not pay)."""
    if name == "add":
        return torch.add(x, y, out=out)
    if name == "softmax":
        return torch.softmax(x, dim=1) if out is None else torch.ops.aten._softmax.out(x, 1, False, out=out)
    return torch.mm(x, y, out=out)


def elements(name, size):
    if name == "matmul":
        return size[0] * size[1] * size[2]
    return size if isinstance(size, int) else size[0] * size[1]


def best_time(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def interpreter_time(name, size, reps=2):
    """Seconds per run under TRITON_INTERPRET=1 (CPU tensors), measured in a fresh process."""
    code = (
        f"import sys; sys.path.insert(0, {HERE!r})\n"
        "from bench_kernel_defs import inputs, run\n"
        "import time, torch\n"
        f"x, y, out = inputs({name!r}, {size!r}, 'cpu')\n"
        f"run({name!r}, x, y, out, {size!r})\n"
        "ts = []\n"
        f"for _ in range({reps}):\n"
        "    t = time.perf_counter()\n"
        f"    run({name!r}, x, y, out, {size!r})\n"
        "    ts.append(time.perf_counter() - t)\n"
        "print(min(ts))\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    big = {"add": 1 << 22, "softmax": (4096, 1024), "matmul": (512, 512, 512)}
    small = {"add": 1 << 20, "softmax": (256, 1024), "matmul": (128, 128, 128)}
    if args.quick:
        big = {"add": 1 << 20, "softmax": (1024, 1024), "matmul": (256, 256, 256)}
    reps = 3 if args.quick else 10
    rows = []
    for name in ("add", "softmax", "matmul"):
        size = big[name]
        x, y, out = inputs(name, size, "spyre")
        xc, yc = x.cpu(), None if y is None else y.cpu()
        t_spyre = best_time(lambda: run(name, x, y, out, size), reps)
        out_c = torch.empty_like(out, device="cpu")
        t_torch = best_time(lambda: torch_op(name, xc, yc, out_c), reps)
        ref = torch_op(name, xc, yc)
        err = (out.cpu() - ref).abs().max().item()
        s = small[name]
        xs, ys, outs = inputs(name, s, "spyre")
        t_spyre_small = best_time(lambda: run(name, xs, ys, outs, s), reps)
        t_interp = interpreter_time(name, s)
        per_elem_ratio = t_interp / t_spyre_small  # same kernel, same size: the per-element ratio
        rows.append({"kernel": name, "size": size, "spyre_s": t_spyre, "torch_s": t_torch,
                     "spyre_over_torch": t_spyre / t_torch, "interp_size": s,
                     "interp_s": t_interp, "spyre_small_s": t_spyre_small,
                     "speedup_vs_interpreter": per_elem_ratio, "max_abs_err": err})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'kernel':<9} {'size':<18} {'spyre ms':>9} {'torch ms':>9} {'spyre/torch':>12} "
          f"{'vs TRITON_INTERPRET':>20} {'max err':>9}")
    for r in rows:
        print(f"{r['kernel']:<9} {str(r['size']):<18} {r['spyre_s'] * 1e3:>9.2f} {r['torch_s'] * 1e3:>9.2f} "
              f"{r['spyre_over_torch']:>11.2f}x {r['speedup_vs_interpreter']:>19.0f}x {r['max_abs_err']:>9.1e}")
    print("spyre/torch: time ratio (lower is better); vs TRITON_INTERPRET: how many times faster per element, "
          "same kernel and size in both")


if __name__ == "__main__":
    main()
