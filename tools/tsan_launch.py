"""Concurrent launches under ThreadSanitizer (`./run.sh sanitize tsan`).

The runtime's worker pool, the allocation table and the per-kernel statistics are shared by host threads.
This drives them from several Python threads at once through a runtime built with -fsanitize=thread, with
nothing else instrumented: the runtime (`_runtime`, plain C) is loaded straight from its file, so neither
torch nor the spyre package is imported in the sanitized process.

  python tools/tsan_launch.py prepare DIR         compile the kernels (normal build, torch) into DIR
  python tools/tsan_launch.py run DIR RUNTIME.so  launch them from 4 threads, check every result

Exit status 0 when every result is right; TSan's own reports go to stderr (and fail the run through
TSAN_OPTIONS=halt_on_error=1, which run.sh sets)."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import struct
import sys
import threading

THREADS = 4
ROUNDS = 60
N = 4096  # elements of the vector kernels
ROWS, COLS = 64, 128  # the softmax's input
MM = 32  # the matmul's size


def prepare(out_dir: str) -> None:
    """Compile add, softmax and a tiled matmul for spyre; write each binary and its launch signature."""
    import torch
    import spyre_triton.reference_kernels as rk
    os.makedirs(out_dir, exist_ok=True)
    dev = "spyre"
    x = torch.rand(N, device=dev)
    kernels = {
        "add": (rk.add_kernel[(N // 1024,)](x, x, torch.empty_like(x), N, BLOCK=1024), "pointers 3, n"),
        "softmax": (rk.softmax_kernel[(ROWS,)](torch.empty(ROWS, COLS, device=dev), torch.rand(ROWS, COLS, device=dev),
                                               COLS, COLS, COLS, BLOCK=COLS), "rows"),
        "matmul": (rk.tile_matmul_kernel[(1,)](*(torch.rand(MM, MM, device=dev) for _ in range(3)), MM, MM, MM,
                                              BM=MM, BN=MM, BK=MM), "one tile"),
    }
    for name, (compiled, _) in kernels.items():
        with open(os.path.join(out_dir, name + ".spyrebin"), "wb") as f:
            f.write(compiled.asm["spyrebin"])
    with open(os.path.join(out_dir, "kernels.json"), "w") as f:
        json.dump(sorted(kernels), f)


def load_runtime(path: str):
    spec = importlib.util.spec_from_file_location("_runtime", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Buffer:
    """A block of device memory written and read through ctypes (no torch in this process)."""

    def __init__(self, rt, values: list[float]):
        self.n = len(values)
        self.addr = rt.alloc(0, 4 * self.n)
        ctypes.memmove(self.addr, struct.pack(f"{self.n}f", *values), 4 * self.n)

    def read(self) -> list[float]:
        return list(struct.unpack(f"{self.n}f", ctypes.string_at(self.addr, 4 * self.n)))


def close(a: list[float], b: list[float], tol: float = 1e-4) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def worker(rt, kernels: dict, seed: int, failures: list) -> None:
    import math
    import random
    rng = random.Random(seed)
    for r in range(ROUNDS):
        which = rng.choice(sorted(kernels))
        threads = rng.choice([1, 2, 4])
        if which == "add":
            xs = [rng.random() for _ in range(N)]
            x, y, o = Buffer(rt, xs), Buffer(rt, xs[::-1]), Buffer(rt, [0.0] * N)
            kernels["add"].launch(0, N // 1024, 1, 1, [x.addr, y.addr, o.addr, N], threads)
            ok = close(o.read(), [a + b for a, b in zip(xs, xs[::-1])])
            bufs = (x, y, o)
        elif which == "softmax":
            xs = [rng.random() for _ in range(ROWS * COLS)]
            o, x = Buffer(rt, [0.0] * (ROWS * COLS)), Buffer(rt, xs)
            kernels["softmax"].launch(0, ROWS, 1, 1, [o.addr, x.addr, COLS, COLS, COLS], threads)
            got, ok = o.read(), True
            for i in range(0, ROWS * COLS, COLS * 16):  # every 16th row
                row = xs[i:i + COLS]
                e = [math.exp(v - max(row)) for v in row]
                ok &= close(got[i:i + COLS], [v / sum(e) for v in e])
            bufs = (o, x)
        else:
            a = [rng.random() for _ in range(MM * MM)]
            b = [rng.random() for _ in range(MM * MM)]
            A, B, C = Buffer(rt, a), Buffer(rt, b), Buffer(rt, [0.0] * (MM * MM))
            kernels["matmul"].launch(0, 1, 1, 1, [A.addr, B.addr, C.addr, MM, MM, MM], threads)
            want = [sum(a[i * MM + k] * b[k * MM + j] for k in range(MM)) for i in range(MM) for j in range(MM)]
            ok = close(C.read(), want, 1e-3)
            bufs = (A, B, C)
        for buf in bufs:
            rt.free(0, buf.addr)
        if not ok:
            failures.append(f"thread {seed} round {r}: {which} with {threads} host threads gave a wrong result")


def run(in_dir: str, runtime_path: str) -> int:
    rt = load_runtime(runtime_path)
    with open(os.path.join(in_dir, "kernels.json")) as f:
        names = json.load(f)
    kernels = {}
    for name in names:
        with open(os.path.join(in_dir, name + ".spyrebin"), "rb") as f:
            kernels[name] = rt.Kernel(f.read())
    failures: list[str] = []
    threads = [threading.Thread(target=worker, args=(rt, kernels, s, failures)) for s in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    launches = sum(k.stats()["launches"] for k in kernels.values())
    print(f"tsan_launch: {THREADS} threads x {ROUNDS} launches: {launches} launches, {len(failures)} wrong")
    for line in failures:
        print("  " + line)
    return 1 if failures or launches != THREADS * ROUNDS else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
