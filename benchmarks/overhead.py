"""Benchmark: what the performance model costs on the host, off and on.

    python benchmarks/overhead.py [--baseline OLD_RUNTIME.so] [--repeat 30]

Compiles a few kernels (dispatch-bound, DMA-bound, PE-bound), then times their launches in a
fresh process that loads only the runtime extension: without the model (the plain dispatch
loop) and with it. With --baseline (the `_runtime` extension built from an older checkout, e.g.
before the model existed) the model-off times are compared against that build, which is how
"off costs nothing" is checked: the off column should match the baseline within noise.
"""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _kernels():
    import triton
    import triton.language as tl

    from spyre_triton.reference_kernels import copy_kernel, tile_matmul_kernel

    @triton.jit
    def loop_kernel(x_ptr, y_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        base = tl.program_id(0) * ITERS * BLOCK
        for i in range(ITERS):
            acc += tl.load(x_ptr + base + i * BLOCK + tl.arange(0, BLOCK)) * 0.5
        tl.store(y_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), acc)

    return copy_kernel, loop_kernel, tile_matmul_kernel


def _prepare(outdir: str) -> list:
    """Compiles the kernels; writes their binaries; returns the launch plans."""
    import torch

    from spyre_triton.perf import capture
    copy_kernel, loop_kernel, matmul_kernel = _kernels()
    dev = "spyre"
    plans = []

    def add(name, compiled, grid, args, sizes):
        path = os.path.join(outdir, name + ".bin")
        with open(path, "wb") as f:
            f.write(compiled.asm["spyrebin"])
        fn = compiled.function if hasattr(compiled, "function") else None
        nprogs = grid[0] * grid[1] * grid[2]

        class _K:  # what capture.params reads
            lx_bytes = fn.lx_bytes if fn is not None else 0
        plans.append({"name": name, "bin": path, "grid": grid, "args": args, "sizes": sizes,
                      "perf": list(capture.params(_K, nprogs))})

    n = 1 << 20
    x, y = torch.rand(n, device=dev), torch.empty(n, device=dev)
    k = copy_kernel[(n // 1024,)](x, y, n, BLOCK=1024)
    add("copy 4 MiB (1024 programs)", k, (n // 1024, 1, 1), ["buf0", "buf1", n], [n * 4, n * 4])
    iters, block = 512, 64
    x = torch.rand(32 * iters * block, device=dev)
    k = loop_kernel[(32,)](x, y, ITERS=iters, BLOCK=block)
    add("loop of 512 small tiles (dispatch-bound)", k, (32, 1, 1), ["buf0", "buf1"],
        [32 * iters * block * 4, 32 * block * 4])
    m = 256
    a = torch.rand(m, m, device=dev, dtype=torch.float16)
    c = torch.empty(m, m, device=dev)
    k = matmul_kernel[(16,)](a, a, c, m, m, m, BM=64, BN=64, BK=64)
    add("matmul 256^3 fp16 (PE)", k, (16, 1, 1), ["buf0", "buf1", "buf2", m, m, m],
        [m * m * 2, m * m * 2, m * m * 4])
    return plans


def _worker(plan_path: str, runtime: str, repeat: int) -> None:
    """Times the plans with the given runtime extension only (no torch, no triton)."""
    loader = importlib.machinery.ExtensionFileLoader("_runtime", runtime)
    spec = importlib.util.spec_from_loader("_runtime", loader)
    rt = importlib.util.module_from_spec(spec)
    loader.exec_module(rt)
    plans = json.load(open(plan_path))
    out = []
    for p in plans:
        k = rt.Kernel(open(p["bin"], "rb").read())
        bufs = [rt.alloc(0, s) for s in p["sizes"]]
        args = [bufs[int(a[3:])] if isinstance(a, str) else a for a in p["args"]]
        has_perf = "perf_param_names" in dir(rt)
        res = {"name": p["name"]}
        modes = [("off", None)] + ([("on", p["perf"])] if has_perf else [])
        for mode, perf in modes:
            kw = {"perf": perf} if perf is not None else {}
            for _ in range(3):
                k.launch(0, *p["grid"], args, **kw)
            ts = []
            for _ in range(repeat):
                t = time.perf_counter()
                k.launch(0, *p["grid"], args, **kw)
                ts.append(time.perf_counter() - t)
            res[mode] = statistics.median(ts) * 1e6
        for b in bufs:
            rt.free(0, b)
        out.append(res)
    print(json.dumps(out))


def _run(plan_path, runtime, repeat):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", plan_path, "--runtime",
                          runtime, "--repeat", str(repeat)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="a _runtime extension built from another checkout, to compare model-off times")
    ap.add_argument("--current", help="the runtime extension to measure (default: the one installed)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="alternate current/baseline this many times")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--runtime", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.worker:
        _worker(opts.worker, opts.runtime, opts.repeat)
        return 0
    from spyre_triton import _runtime
    tmp = tempfile.mkdtemp(prefix="spyre-overhead-")
    plans = _prepare(tmp)
    plan_path = os.path.join(tmp, "plans.json")
    json.dump(plans, open(plan_path, "w"))
    cur, base = [], []
    for _ in range(opts.rounds):  # alternate, so machine noise hits both alike
        cur.append(_run(plan_path, opts.current or _runtime.__file__, opts.repeat))
        if opts.baseline:
            base.append(_run(plan_path, opts.baseline, opts.repeat))

    def best(runs, i, key):
        return min(r[i].get(key, float("nan")) for r in runs)

    head = f"{'kernel':<42} {'model off us':>12} {'model on us':>12} {'on/off':>7}"
    if base:
        head += f" {'baseline us':>12} {'off/baseline':>12}"
    print(head)
    for i, p in enumerate(plans):
        off, on = best(cur, i, "off"), best(cur, i, "on")
        line = f"{p['name']:<42} {off:>12.1f} {on:>12.1f} {on / off:>7.2f}"
        if base:
            b = best(base, i, "off")
            line += f" {b:>12.1f} {off / b:>12.3f}"
        print(line)
    print(f"(best of {opts.rounds} rounds of the median of {opts.repeat} launches; SPYRE_NUM_THREADS="
          f"{os.environ.get('SPYRE_NUM_THREADS', 'default')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
