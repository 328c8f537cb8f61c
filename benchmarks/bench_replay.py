"""Launch graphs against plain compiled calls, side by side in one process (issue 23): what a decode step
costs at the Inductor call, and what one launch costs at each layer.

    python benchmarks/bench_replay.py [--model llama] [--rounds 7] [--calls 30]

`model.forward` (benchmarks/bench_decode.py's models) is compiled with mode="reduce-overhead"; generate()
captures the decode graph, and one decode step's inputs are kept. Then, CPU time per call (the median of
--rounds rounds of --calls calls each, the variants interleaved):
  plain      the Inductor callable of the decode graph itself (Inductor's Python per kernel, Triton's
             launcher, the C launch), as without launch graphs
  graph      the launch-graph wrapper given the same tensors every call (a decode step's KV cache)
  graph-new  the wrapper given other tensors every other call (the plan is rebound to them)
  replay     the bare C replay of the captured plan
Each call first resets the inputs the step mutates (cache rows, counters); `reset` is that cost alone.
Then per launch of a one-program kernel: Inductor's CachingAutotuner.run, Triton's launcher, the C
launch, and the replay of a one-launch graph.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["SPYRE_NUM_THREADS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fns: dict, rounds: int, calls: int) -> dict:
    """{name: median CPU ms per call}, the variants interleaved round by round."""
    per = {k: [] for k in fns}
    for _ in range(rounds):
        for name, f in fns.items():
            t0 = time.process_time()
            for _ in range(calls):
                f()
            per[name].append((time.process_time() - t0) / calls * 1e3)
    return {k: statistics.median(v) for k, v in per.items()}


def decode_step(model_name: str, rounds: int, calls: int) -> dict:
    import torch
    import bench_decode as bd
    from spyre_triton import graphs
    made = []
    orig = graphs.graphed_inductor_callable

    def spy(model, static_idxs, mutated=()):  # keeps each graphed callable with one call's inputs
        run = orig(model, static_idxs, mutated)
        rec = {"model": model, "run": run, "static": set(static_idxs or ()), "mutated": list(mutated or ()),
               "inputs": None}

        def wrapped(new_inputs):
            if rec["inputs"] is None and keep[0]:
                rec["inputs"] = [x.clone() if isinstance(x, torch.Tensor) and i not in rec["static"] else x
                                 for i, x in enumerate(new_inputs)]
            return run(new_inputs)
        made.append(rec)
        return wrapped

    keep = [False]
    graphs.graphed_inductor_callable = spy
    torch.set_num_threads(1)
    model, ids = bd.build(model_name)
    model, ids = model.to("spyre"), ids.to("spyre")
    model.forward = torch.compile(model.forward, mode="reduce-overhead")
    bd.generate(model, ids, 4)
    keep[0] = True  # the graphs are captured: keep the inputs of the next (first decode) call
    bd.generate(model, ids, 4)
    graphs.graphed_inductor_callable = orig
    rec = [r for r in made if r["inputs"] is not None][-1]
    ins = rec["inputs"]
    entry = next(e for e in rec["run"]._spyre_graphs.values() if e)
    pristine = {i: ins[i].clone() for i in rec["mutated"]}
    fresh = [x.clone() if isinstance(x, torch.Tensor) and i not in rec["static"] and i not in pristine else x
             for i, x in enumerate(ins)]  # other tensors for the inputs a decode step allocates anew
    flip = [False]

    def reset():
        for i, v in pristine.items():
            ins[i].copy_(v)

    def graph_new():
        reset()
        flip[0] = not flip[0]
        rec["run"](list(fresh if flip[0] else ins))

    fns = {"plain": lambda: (reset(), rec["model"](list(ins))),
           "graph": lambda: (reset(), rec["run"](list(ins))),
           "graph-new": graph_new,
           "replay": lambda: (reset(), entry.g.replay()),
           "reset": reset}
    for f in fns.values():
        f()
    res = timed(fns, rounds, calls)
    res["launches"] = entry.g.launches()
    return res


def per_launch(rounds: int, calls: int) -> dict:
    import torch
    from triton import knobs
    x = torch.ones(16, device="spyre")
    y = torch.ones(16, device="spyre")
    fc = torch.compile(lambda a, b: a * 2 + b)
    fc(x, y)
    g = torch.spyre.SpyreGraph()
    with torch.spyre.graph(g):
        out = fc(x, y)
    (function, device, gx, gy, gz, addresses), = g._sealed
    kargs = (x, y, out, 16)  # the kernel's arguments as tensors (the plan holds their addresses)
    assert addresses == tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a for a in kargs), addresses
    autotuner = next(m for m in list(sys.modules.values())
                     if "torchinductor" in str(getattr(m, "__file__", "")) and hasattr(m, "call")
                     and any(k.startswith("triton_poi_fused_add_mul") for k in vars(m)))
    ca = next(v for k, v in vars(autotuner).items() if k.startswith("triton_poi_fused_add_mul"))
    binary = next(v for v in ca._cached_launcher.__globals__.values() if hasattr(v, "launch_metadata"))
    hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    fns = {"Inductor CachingAutotuner.run": lambda: ca.run(x, y, out, 16, stream=0),
           "Triton launcher (C)": lambda: binary.run(1, 1, 1, 0, binary.function, binary.packed_metadata, None,
                                                     *hooks, x, y, out, 16),
           "Kernel.launch (C)": lambda: function.launch(device, gx, gy, gz, kargs),
           "SpyreGraph.replay, 1 launch": g.replay}
    return {k: v * 1e3 for k, v in timed(fns, rounds, calls * 300).items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=30)
    a = ap.parse_args()
    step = decode_step(a.model, a.rounds, a.calls)
    print(f"{a.model} decode step ({step.pop('launches')} launches), CPU ms per call, median of {a.rounds}:")
    for k, v in step.items():
        print(f"  {k:<10} {v:8.3f}  ({v / step['plain']:.2f}x plain)")
    print("one launch of a one-program kernel, CPU us:")
    for k, v in per_launch(a.rounds, a.calls).items():
        print(f"  {k:<30} {v:7.2f}")


if __name__ == "__main__":
    main()
