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
import triton
import triton.language as tl

KERNELS = r'''
import triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

def run(name, x, y, out, size):
    if name == "add":
        n = x.numel()
        add_kernel[(triton.cdiv(n, 4096),)](x, y, out, n, BLOCK=4096)
    elif name == "softmax":
        rows, cols = x.shape
        softmax_kernel[(rows,)](out, x, x.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    else:
        M, K = x.shape
        N = y.shape[1]
        matmul_kernel[(M // 64, N // 64)](x, y, out, M, N, K, BM=64, BN=64, BK=32)

def inputs(name, size, device):
    import torch
    g = torch.Generator().manual_seed(0)
    if name == "add":
        x, y = torch.rand(size, generator=g), torch.rand(size, generator=g)
        out = torch.empty(size)
    elif name == "softmax":
        x = torch.randn(size, generator=g); y = None; out = torch.empty(size)
    else:
        x = torch.randn(size[0], size[1], generator=g); y = torch.randn(size[1], size[2], generator=g)
        out = torch.empty(size[0], size[2])
    mv = lambda t: None if t is None else t.to(device)
    return mv(x), mv(y), mv(out)
'''

exec(compile(KERNELS, "<bench kernels>", "exec"))


def torch_op(name, x, y):
    if name == "add":
        return torch.add(x, y)
    if name == "softmax":
        return torch.softmax(x, dim=1)
    return torch.mm(x, y)


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
    code = KERNELS + (
        "\nimport time, torch\n"
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
    small = {"add": 1 << 14, "softmax": (32, 1024), "matmul": (64, 64, 64)}
    if args.quick:
        big = {"add": 1 << 20, "softmax": (1024, 1024), "matmul": (256, 256, 256)}
    reps = 3 if args.quick else 10
    rows = []
    for name in ("add", "softmax", "matmul"):
        size = big[name]
        x, y, out = inputs(name, size, "spyre")
        xc, yc = x.cpu(), None if y is None else y.cpu()
        t_spyre = best_time(lambda: run(name, x, y, out, size), reps)
        t_torch = best_time(lambda: torch_op(name, xc, yc), reps)
        ref = torch_op(name, xc, yc)
        err = (out.cpu() - ref).abs().max().item()
        s = small[name]
        xs, ys, outs = inputs(name, s, "spyre")
        t_spyre_small = best_time(lambda: run(name, xs, ys, outs, s), reps)
        t_interp = interpreter_time(name, s)
        per_elem_ratio = (t_interp / elements(name, s)) / (t_spyre_small / elements(name, s))
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
          "measured at the small size")


if __name__ == "__main__":
    main()
