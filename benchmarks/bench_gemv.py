"""Skinny matmuls (a decode step's x @ W.t(), M = 1..16 rows) under torch.compile on spyre, against
torch's own x @ W.t() on the host: CPU time per call at one host thread, and the ratio.

    python benchmarks/bench_gemv.py [--m 1,4,16] [--shapes NAME,...] [--dtype float32] [--json]

Shapes are the weights (N x K, stored as nn.Linear stores them) of the decode benchmark's models
(benchmarks/bench_decode.py) and of the real models' widths they stand for. The spyre figure is a whole
compiled call (wrapper, launch, kernel); `GB/s` is the weight's bytes over that time.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("SPYRE_NUM_THREADS", "1")

# name -> (N, K): out_features x in_features
SHAPES = {
    "gpt2-bench-fc": (1024, 256),       # benchmarks/bench_decode.py's GPT-2-style MLP up
    "llama-bench-up": (1376, 512),      # ... Llama-/Granite-style gate/up
    "llama-bench-down": (512, 1376),    # ... down
    "bench-lm-head": (8192, 512),       # ... the logits
    "gpt2-small-fc": (3072, 768),       # GPT-2 small (124M): MLP up
    "llama-8b-q": (4096, 4096),         # Llama-3.1-8B / Granite-3.3-8B: q_proj / o_proj
    "granite-8b-down": (4096, 12800),   # Granite-3.3-8B: down_proj
}


def cpu_time_per_call(fn, x, min_s=0.3):
    fn(x)
    times = []
    t_end = time.process_time() + min_s
    while len(times) < 5 or time.process_time() < t_end:
        t0 = time.process_time()
        fn(x)
        times.append(time.process_time() - t0)
        if len(times) >= 2000:
            break
    times.sort()
    return times[len(times) // 2]


def measure(name, m, dtype):
    import torch
    n, k = SHAPES[name]
    g = torch.Generator().manual_seed(0)
    w = torch.randn(n, k, generator=g).to(dtype)
    x = torch.randn(m, k, generator=g).to(dtype)
    ws, xs = w.to("spyre"), x.to("spyre")
    f = torch.compile(lambda a: a @ ws.t())
    ys = f(xs)
    ref = (x.double() @ w.double().t())
    err = ((ys.cpu().double() - ref).abs().max() / ref.abs().max()).item()
    spy = cpu_time_per_call(f, xs)
    host = cpu_time_per_call(lambda a: a @ w.t(), x)
    gbs = n * k * w.element_size() / spy / 1e9
    return {"shape": name, "m": m, "n": n, "k": k, "spyre_us": spy * 1e6, "torch_us": host * 1e6,
            "ratio": spy / host, "spyre_GBps": gbs, "rel_err": err}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="1,4,16")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    dtype = getattr(torch, a.dtype)
    rows = [measure(s, int(m), dtype) for s in a.shapes.split(",") for m in a.m.split(",")]
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'shape':<18} {'M':>3} {'N x K':>12} {'spyre us':>9} {'torch us':>9} {'ratio':>6} {'GB/s':>6} {'rel err':>8}")
    for r in rows:
        print(f"{r['shape']:<18} {r['m']:>3} {str(r['n']) + 'x' + str(r['k']):>12} {r['spyre_us']:>9.1f} "
              f"{r['torch_us']:>9.1f} {r['ratio']:>6.2f} {r['spyre_GBps']:>6.1f} {r['rel_err']:>8.1e}")


if __name__ == "__main__":
    main()
