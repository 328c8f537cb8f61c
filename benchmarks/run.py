"""The benchmark runner of issue 5: spyre side by side with torch on the CPU, Triton's interpreter and
Inductor's CPU backend, with the issue's targets next to the measured ratios.

    python benchmarks/run.py            # full run: a few minutes on 2 cores
    python benchmarks/run.py --quick    # smaller sizes, GPT-2-style model only: under a minute
    python benchmarks/run.py --json     # the same figures as JSON on stdout (the tables go to stderr)
    python benchmarks/run.py --only kernels,launch      # sections: kernels interp launch models distributed decode

Sections (the issue's items):
  kernels  (1) Triton kernels on spyre vs the same op in torch eager on the CPU, at 1 and at 2 host
               threads for both; torch writes into preallocated outputs (out=) as the kernels do
           (6) 1 vs 2 host threads on the matmul (compute-bound), with torch.mm's own scaling beside it
  interp   (2) per-element speed vs TRITON_INTERPRET=1 (a subprocess), same kernels, same sizes, 1 thread
  launch   (4) median launch time of an empty kernel: runtime only, @triton.jit, Inductor's launcher
  models   (3) GPT-2/BERT-style models (transformers configs): torch.compile on spyre vs Inductor's
               CPU backend vs eager CPU, one subprocess per model and backend
           (5) our TTIR->binary time per kernel over the models' kernels, cold and warm cache
           (7) peak RSS of each model subprocess

Everything timed in this process is timed side by side (spyre and torch runs interleaved); models run
in subprocesses so that each has its own peak RSS. Ratios are of minimum times over repetitions for
kernels and launches (the least disturbed estimate on a shared machine) and of medians for models.
The machine's load average is printed at the start and the end: read the figures with it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# libgomp's default wait policy spins; on a machine shared with other jobs, a spinning OpenMP thread
# that is descheduled stalls every barrier of torch's parallel loops (2-thread torch.add became 10x
# slower than 1 thread here). The spyre runtime's workers sleep on a condition variable, so for a fair
# comparison torch's threads sleep too. Read when torch loads libgomp: set before importing torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
MARK = "@@BENCH-JSON@@"
_T0 = time.perf_counter()

TARGETS = {
    "memory": ("<= 1.5x torch", lambda r: r <= 1.5),
    "matmul": (">= 50% of torch.mm", lambda r: r >= 0.5),
    "interp": (">= 1000x", lambda r: r >= 1000),
    "model": ("<= 2x Inductor CPU", lambda r: r <= 2.0),
    "launch": ("<= 10 us", lambda r: r <= 10.0),
    "lowering": ("<= 20 ms median", lambda r: r <= 20.0),
    "threads": (">= 1.8x", lambda r: r >= 1.8),
    "warm": ("0 compiles", lambda r: r == 0),
    "collective": ("<= 1.2x gloo", lambda r: r <= 1.2),
}


def log(*a):
    print(*a, file=sys.stderr if _JSON else sys.stdout, flush=True)


_JSON = False


# --- helpers ------------------------------------------------------------------------------------
def set_threads(n: int):
    import torch
    torch.set_num_threads(n)
    os.environ["SPYRE_NUM_THREADS"] = str(n)   # read by the runtime at every launch


def summarise(ts):
    return {"min": min(ts), "median": statistics.median(ts), "n": len(ts)}


def time_interleaved(fns: dict, reps: int, warm: int = 1) -> dict:
    """Time several callables round-robin (so a burst of load hits all of them alike): wall time, and
    the process's CPU time (all threads), which is what a 1-thread run costs when it is not preempted."""
    for _ in range(warm):
        for f in fns.values():
            f()
    ts = {k: [] for k in fns}
    cs = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            c, t = time.process_time(), time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t)
            cs[k].append(time.process_time() - c)
    return {k: dict(summarise(v), cpu_min=min(cs[k])) for k, v in ts.items()}


def median_ns(f, n: int, warm: int = 50) -> dict:
    for _ in range(warm):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter_ns()
        f()
        ts.append(time.perf_counter_ns() - t)
    ts.sort()
    return {"median_us": ts[n // 2] / 1e3, "min_us": ts[0] / 1e3, "n": n}


def machine() -> dict:
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(l.split(":", 1) for l in out.splitlines() if ":" in l)
        f = {k.strip(): v.strip() for k, v in fields.items()}
        model = f"{f.get('Model name', '?')} (family {f.get('CPU family', '?')}, model {f.get('Model', '?')})"
        if f.get("Hypervisor vendor"):
            model += f", {f['Hypervisor vendor']} guest"
    except OSError:
        pass
    import torch
    import triton
    root = os.path.dirname(HERE)
    git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True).stdout.rstrip()
    dirty = [l[3:] for l in git("status", "--porcelain", "--", "runtime", "spyre_triton", "backend").splitlines()]
    return {"date": datetime.date.today().isoformat(), "cpu": model, "cpus": os.cpu_count(),
            "commit": git("rev-parse", "--short", "HEAD"), "uncommitted_sources": dirty,
            "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def loadavg() -> list:
    return [round(x, 2) for x in os.getloadavg()]


def verdict(kind, value):
    if value is None:
        return TARGETS[kind][0], "n/a"
    return TARGETS[kind][0], "met" if TARGETS[kind][1](value) else "NOT MET"


def table(rows, cols):
    """rows: list of lists of str; cols: headers. Left-align the first column, right-align the rest."""
    w = [max(len(str(c)), *(len(str(r[i])) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = lambda r: "  ".join(str(v).ljust(w[i]) if i == 0 else str(v).rjust(w[i]) for i, v in enumerate(r))
    lines = [fmt(cols), "  ".join("-" * x for x in w)] + [fmt(r) for r in rows]
    return "\n".join(lines)


# --- (1) and (6): kernels vs torch eager ---------------------------------------------------------
def bench_kernels(sizes: dict, reps: int, threads: list) -> dict:
    import torch
    import bench_kernels as K
    rows = []
    for name, cls in K.KERNELS.items():
        b = cls(sizes[name])
        a = b.make("spyre")
        ac = {k: v.cpu() for k, v in a.items()}
        t = time.perf_counter()
        b.run(a)                                 # compiles (cold or from Triton's cache)
        first = time.perf_counter() - t
        b.torch_out(ac)
        err = max((g.cpu().float() - r.float()).abs().max().item() for g, r in zip(K.outputs(a), K.outputs(ac)))
        row = {"kernel": name, "desc": b.desc, "size": list(sizes[name]) if isinstance(sizes[name], tuple)
               else sizes[name], "bound": b.bound, "elements": b.elements(), "flops": b.flops(),
               "first_call_s": first, "max_abs_err": err, "atol": b.atol, "info": b.info, "threads": {}}
        for n in threads:
            set_threads(n)
            r = time_interleaved({"spyre": lambda: b.run(a), "torch_out": lambda: b.torch_out(ac),
                                  "torch_fresh": lambda: b.torch_fresh(ac)}, reps)
            r["ratio"] = r["spyre"]["min"] / r["torch_out"]["min"]
            r["ratio_fresh"] = r["spyre"]["min"] / r["torch_fresh"]["min"]
            r["ratio_cpu_time"] = r["spyre"]["cpu_min"] / max(r["torch_out"]["cpu_min"], 1e-9)
            if b.flops():
                r["spyre_gflops"] = b.flops() / r["spyre"]["min"] / 1e9
                r["torch_gflops"] = b.flops() / r["torch_out"]["min"] / 1e9
            row["threads"][str(n)] = r
        rows.append(row)
        del a, ac
        log(f"  {name:<11} " + "  ".join(
            f"{n} thr: spyre {row['threads'][str(n)]['spyre']['min'] * 1e3:8.2f} ms, torch "
            f"{row['threads'][str(n)]['torch_out']['min'] * 1e3:7.2f} ms" for n in threads))
    return {"rows": rows, "threads": threads, "reps": reps}


def kernel_verdict(row, threads: str):
    """The figure judged against the target: at 1 thread, from CPU time (see print_kernels)."""
    t = row["threads"][threads]
    if row["bound"] == "compute":
        v = t["torch_out"]["cpu_min"] / t["spyre"]["cpu_min"]
        return "matmul", v, f"{v * 100:.0f}% of mm"
    v = t["ratio_cpu_time"]
    return "memory", v, f"{v:.2f}x"


def _ratio_str(row, t, key="torch_out"):
    if row["bound"] == "compute":
        return f"{t[key]['min'] / t['spyre']['min'] * 100:.0f}% of mm"
    return f"{t['spyre']['min'] / t[key]['min']:.2f}x"


def print_kernels(res):
    th = [str(n) for n in res["threads"]]
    cols = ["kernel", "size"]
    for n in th:
        cols += [f"spyre ms {n}t", f"torch ms {n}t", f"wall ratio {n}t"]
        if n == th[0]:
            cols += [f"CPU ratio {n}t"]
    cols += [f"fresh-out ratio {th[0]}t", "max err", "target", f"met (CPU {th[0]}t)"]
    rows = []
    for r in res["rows"]:
        line = [r["kernel"], "x".join(map(str, r["size"])) if isinstance(r["size"], list) else f"{r['size']}"]
        for n in th:
            t = r["threads"][n]
            line += [f"{t['spyre']['min'] * 1e3:.2f}", f"{t['torch_out']['min'] * 1e3:.2f}", _ratio_str(r, t)]
            if n == th[0]:
                line += [kernel_verdict(r, n)[2]]
        kind, value, _ = kernel_verdict(r, th[0])
        target, met = verdict(kind, value)
        if r["kernel"] in ("colsum", "embedding"):
            target += " *"
        if r["info"]:
            target, met = "(info)", ""
        line += [_ratio_str(r, r["threads"][th[0]], "torch_fresh"), f"{r['max_abs_err']:.1e}", target, met]
        rows.append(line)
    log(table(rows, cols))
    log("ratio = spyre time / torch time, torch writing into preallocated outputs (out=), min over repetitions;"
        "\n  matmul: torch.mm time / spyre time = the share of torch.mm's throughput (fp16: torch upcasts, then an"
        "\n  fp32 GEMM - torch.mm in fp16 has no fast CPU path and cannot give fp32). CPU ratio: the same from the"
        "\n  process's CPU time, which preemption by other jobs does not inflate; the targets are judged on it at"
        "\n  1 thread (on an idle machine it equals the wall ratio). fresh-out ratio: torch allocating its result"
        "\n  (`x + y`); fresh multi-MB outputs cost torch page faults the kernels, writing into allocated device"
        "\n  memory, do not pay. * memory-bound; the issue names the target for add/softmax/layernorm only.")


# --- (6): host threads ---------------------------------------------------------------------------
def bench_threads(size, reps: int) -> dict:
    """The fp32 matmul (compute-bound) at 1 and 2 host threads, runs interleaved; wall time and the
    process's CPU time (all threads), so that on a loaded machine one can tell a runtime that does not
    scale (CPU time grows) from cores that are not there (CPU time / wall time stays near 1)."""
    import bench_kernels as K
    b = K.KERNELS["matmul_f32"](size)
    a = b.make("spyre")
    ac = {k: v.cpu() for k, v in a.items()}
    b.run(a)
    out = {}
    for who, fn in (("spyre", lambda: b.run(a)), ("torch.mm", lambda: b.torch_out(ac))):
        wall = {1: [], 2: []}
        cpu = {1: [], 2: []}
        for n in (1, 2):
            set_threads(n)
            fn()
        for _ in range(reps):
            for n in (1, 2):
                set_threads(n)
                c, t = time.process_time(), time.perf_counter()
                fn()
                wall[n].append(time.perf_counter() - t)
                cpu[n].append(time.process_time() - c)
        out[who] = {"wall_1": summarise(wall[1]), "wall_2": summarise(wall[2]),
                    "cpu_1": summarise(cpu[1]), "cpu_2": summarise(cpu[2]),
                    "speedup": min(wall[1]) / min(wall[2]),
                    "cores_used_2": statistics.median(c / w for c, w in zip(cpu[2], wall[2])),
                    "cpu_time_growth": statistics.median(cpu[2]) / statistics.median(cpu[1])}
    return {"size": list(size), "reps": reps, **out}


def print_threads(res):
    rows = []
    for who in ("spyre", "torch.mm"):
        r = res[who]
        target, met = verdict("threads", r["speedup"]) if who == "spyre" else ("", "")
        rows.append([who, f"{r['wall_1']['min'] * 1e3:.1f}", f"{r['wall_2']['min'] * 1e3:.1f}",
                     f"{r['speedup']:.2f}x", f"{r['cores_used_2']:.2f}", f"{r['cpu_time_growth']:.2f}x", target, met])
    log(table(rows, ["matmul fp32 " + "x".join(map(str, res["size"])), "1 thread ms", "2 threads ms",
                     "speedup", "cores obtained (2t)", "CPU time 2t/1t", "target", "met"]))
    log("cores obtained = process CPU time / wall time in the 2-thread runs (median): below 2 when other jobs "
        "hold the cores;\n  CPU time 2t/1t above 1 is work the second thread adds (synchronisation, "
        "contention)")


# --- (2): vs TRITON_INTERPRET=1 ------------------------------------------------------------------
INTERP_SIZES = {   # what TRITON_INTERPRET=1 finishes in about a second per kernel (full) or less (quick)
    "full": {"add": 1 << 20, "softmax": (512, 1024), "layernorm": (256, 1024), "colsum": (4096, 1024),
             "embedding": (2048, 32768, 512), "matmul_f32": (512, 512, 512), "matmul_f16": (512, 512, 512),
             "matmul_f32_nowrap": (512, 512, 512)},
    "quick": {"add": 1 << 18, "softmax": (128, 1024), "layernorm": (64, 1024), "colsum": (1024, 1024),
              "embedding": (512, 32768, 512), "matmul_f32": (256, 256, 256), "matmul_f16": (256, 256, 256),
              "matmul_f32_nowrap": (256, 256, 256)},
}


def interp_worker(sizes_json: str, reps: int):
    """In the TRITON_INTERPRET=1 subprocess: seconds per run of each kernel on CPU tensors."""
    import torch
    import bench_kernels as K
    torch.set_num_threads(1)
    sizes = json.loads(sizes_json)
    out = {}
    for name, cls in K.KERNELS.items():
        size = sizes[name]
        b = cls(tuple(size) if isinstance(size, list) else size)
        a = b.make("cpu")
        b.run(a)
        ts = []
        for _ in range(reps):
            t = time.process_time()
            b.run(a)
            ts.append(time.process_time() - t)
        out[name] = min(ts)
    print(MARK + json.dumps(out))


def bench_interp(mode: str, reps: int) -> dict:
    import bench_kernels as K
    sizes = INTERP_SIZES[mode]
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_interp", json.dumps(sizes),
                        "--_reps", str(reps)], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("TRITON_INTERPRET=1 subprocess failed:\n" + p.stderr[-3000:])
    interp = json.loads(p.stdout.split(MARK)[-1])
    wall = time.perf_counter() - t
    set_threads(1)
    rows = []
    for name, cls in K.KERNELS.items():
        b = cls(sizes[name])
        a, c = b.make("spyre"), b.make("cpu")
        # torch eager at the same size shows what a native kernel scores against the interpreter
        rr = time_interleaved({"spyre": lambda: b.run(a), "torch": lambda: b.torch_out(c)}, max(reps, 5))
        r, sp, tc = rr["spyre"], rr["spyre"]["cpu_min"], rr["torch"]["cpu_min"]
        rows.append({"kernel": name, "size": sizes[name], "elements": b.elements(), "interp_s": interp[name],
                     "spyre_s": sp, "spyre_wall_s": r["min"], "speedup": interp[name] / sp,
                     "torch_s": tc, "torch_speedup": interp[name] / tc,
                     "interp_ns_per_elem": interp[name] / b.elements() * 1e9,
                     "spyre_ns_per_elem": sp / b.elements() * 1e9})
    return {"rows": rows, "subprocess_wall_s": wall, "threads": 1}


def print_interp(res):
    rows = []
    for r in res["rows"]:
        target, met = verdict("interp", r["speedup"]) if not K_INFO.get(r["kernel"]) else ("(info)", "")
        size = "x".join(map(str, r["size"])) if isinstance(r["size"], (list, tuple)) else str(r["size"])
        rows.append([r["kernel"], size, f"{r['interp_s'] * 1e3:.1f}", f"{r['spyre_s'] * 1e3:.3f}",
                     f"{r['interp_ns_per_elem']:.2f}", f"{r['spyre_ns_per_elem']:.3f}", f"{r['speedup']:.0f}x",
                     f"{r['torch_s'] * 1e3:.3f}", f"{r['torch_speedup']:.0f}x", target, met])
    log(table(rows, ["kernel", "size", "interp ms", "spyre ms", "interp ns/elem", "spyre ns/elem",
                     "speedup", "torch ms", "torch's speedup", "target", "met"]))
    log("same kernel, same size, 1 thread each (the interpreter's numpy/BLAS limited to 1 thread), minimum "
        "process CPU time;\n  matmul elements = M*N*K (the interpreter runs tl.dot as one numpy matmul per tile);\n"
        "  torch's speedup: the same op in torch eager (matmul: torch.mm) against the interpreter, the same way -\n"
        "  what a native CPU kernel scores on this target")


# --- (4): launch overhead ------------------------------------------------------------------------
def bench_launch(n: int) -> dict:
    import torch
    import bench_kernels as K
    from spyre_triton import _runtime
    res = {}
    x = torch.empty(1, device="spyre")
    set_threads(os.cpu_count() or 1)
    ck = K.empty_kernel[(1,)](x)
    fn = ck.function
    res["runtime Kernel.launch, grid 1 (C: argument packing + run)"] = median_ns(
        lambda: fn.launch(0, 1, 1, 1, (x,)), n)
    res["@triton.jit empty kernel, grid 1"] = median_ns(lambda: K.empty_kernel[(1,)](x), n)
    # what of that is spyre's: the launcher Triton's JITFunction.run calls last (the rest is Triton's frontend:
    # binding and specialising the arguments, the cache key, launch metadata), and how fast this host runs
    # Python, which bounds the frontend
    from triton import knobs
    hooks = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    res["@triton.jit launch: spyre's launcher alone (CompiledKernel.run, as JITFunction.run calls it)"] = median_ns(
        lambda: ck.run(1, 1, 1, 0, ck.function, ck.packed_metadata, None, *hooks, x), n)
    ints = list(range(100))
    res["host Python speed, for reference: sum() of a list of 100 ints"] = median_ns(lambda: sum(ints), n)
    res[f"@triton.jit empty kernel, grid 64, {os.cpu_count()} threads"] = median_ns(
        lambda: K.empty_kernel[(64,)](x), n)

    # Inductor's launcher path: a compiled x + 1 on one element is a (nearly) empty pointwise kernel.
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    before = {id(m) for m in PyCodeCache.modules}
    f = torch.compile(lambda t: t + 1)
    f(x)
    auto = None
    for m in PyCodeCache.modules:
        if id(m) in before:
            continue
        for v in vars(m).values():
            if isinstance(v, CachingAutotuner):
                auto = v
    if auto is not None and len(auto.launchers) == 1:
        out = torch.empty(1, device="spyre")
        xin = torch.ones(1, device="spyre")
        args = (xin, out, 1)
        auto.run(*args, stream=0)
        if out.cpu().item() == 2.0:
            res["Inductor CachingAutotuner.run (x + 1, 1 element)"] = median_ns(lambda: auto.run(*args, stream=0), n)
            lau = auto.launchers[0]
            res["Inductor's launcher function alone"] = median_ns(lambda: lau(*args, stream=0), n)
    res["torch.compile'd x + 1 on spyre, whole call (guards, wrapper, output alloc, launch)"] = median_ns(
        lambda: f(x), n)
    xc = torch.ones(1)
    g = torch.compile(lambda t: t + 1)
    g(xc)
    res["torch.compile'd x + 1 on the CPU backend (C++), whole call, for reference"] = median_ns(lambda: g(xc), n)
    res["eager x + 1 on spyre (host fallback op)"] = median_ns(lambda: x + 1, n)
    return res


def print_launch(res):
    rows = []
    for k, v in res.items():
        if k.startswith("@triton.jit empty kernel, grid 1") or k.startswith("Inductor CachingAutotuner"):
            target, met = verdict("launch", v["median_us"])
        else:
            target, met = "", ""
        rows.append([k, f"{v['median_us']:.2f}", f"{v['min_us']:.2f}", target, met])
    log(table(rows, ["path", "median us", "min us", "target", "met"]))


# --- (3), (5), (7): models in subprocesses -------------------------------------------------------
def _vm(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


_PEAK = [0.0]   # the process's peak RSS over all phases (VmHWM is reset between them)


def _reset_peak_rss():
    _PEAK[0] = max(_PEAK[0], _vm("VmHWM"))
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def install_compile_counters():
    """Count and time our compile stages (Triton calls them through the backend class, so class-level
    wrappers see every compile of this process)."""
    from spyre_triton.backend.compiler import SpyreBackend
    from spyre_triton.compiler import lower
    rec = {"ttir": [], "spyreasm": [], "spyrebin": [], "lower_module": []}

    def wrap_static(stage):
        real = getattr(SpyreBackend, "make_" + stage)

        def w(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                rec[stage].append(time.perf_counter() - t)
        setattr(SpyreBackend, "make_" + stage, staticmethod(w))

    for s in ("ttir", "spyreasm", "spyrebin"):
        wrap_static(s)
    real_lower = lower.lower_module

    def lw(*a, **k):
        t = time.perf_counter()
        try:
            return real_lower(*a, **k)
        finally:
            rec["lower_module"].append(time.perf_counter() - t)
    lower.lower_module = lw
    return rec


def model_worker(name: str, phases: list, quick: bool, threads: int, reps: int, again: bool, cache: str | None):
    """One model subprocess: the phases in order ("cpu": eager and Inductor CPU timed side by side;
    "spyre": torch.compile on spyre with compile counters). Prints one JSON object."""
    import torch
    import models
    set_threads(threads)
    out = {"model": name, "threads": threads, "rss_after_imports_mb": _vm("VmRSS")}
    model, kwargs = models.build(name, quick)
    with torch.no_grad():
        if "cpu" in phases:
            res = out["cpu"] = {}
            _reset_peak_rss()
            model(**kwargs)
            res["peak_rss_eager_mb"] = _vm("VmHWM")
            compiled = torch.compile(model)
            t = time.perf_counter()
            compiled(**kwargs)
            res["first_call_s"] = time.perf_counter() - t
            r = time_interleaved({"eager": lambda: model(**kwargs), "inductor_cpu": lambda: compiled(**kwargs)}, reps)
            res.update(r)
            res["peak_rss_inductor_cpu_mb"] = _vm("VmHWM")   # includes the eager runs' peak
            ref = models.first_tensor(model(**kwargs))
            res["max_abs_err"] = (models.first_tensor(compiled(**kwargs)) - ref).abs().max().item()
            torch._dynamo.reset()
            del compiled
        if "spyre" in phases:
            import spyre_triton
            res = out["spyre"] = {}
            if cache:   # fresh (cold) or the cold run's (warm) cache directories
                os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
            torch._inductor.config.compile_threads = 1   # compile in this process, where the counters are
            rec = install_compile_counters()
            ref = models.first_tensor(model(**kwargs)).clone()
            dev = model.to("spyre")
            if hasattr(dev, "tie_weights"):
                dev.tie_weights()   # Module.to("spyre") makes new Parameters, untying shared weights
            dkw = {k: v.to("spyre") for k, v in kwargs.items()}
            _reset_peak_rss()
            compiled = torch.compile(dev)
            t = time.perf_counter()
            o = models.first_tensor(compiled(**dkw))
            res["first_call_s"] = time.perf_counter() - t
            res["max_abs_err"] = (o.cpu() - ref).abs().max().item()
            res["compile"] = {k: list(v) for k, v in rec.items()}
            res["spyre"] = time_interleaved({"s": lambda: compiled(**dkw)}, reps)["s"]
            with spyre_triton.track() as tr:     # where the time goes: kernels' host time, per call
                for _ in range(reps):
                    compiled(**dkw)
            res["kernels_per_call"] = sum(tr.kernels.values()) // reps
            res["distinct_kernels"] = len(tr.kernels)
            res["host_fallbacks"] = {k: v // reps for k, v in tr.fallbacks.items()}
            res["kernel_ms_per_call"] = sum(tr.kernel_ns.values()) / 1e6 / reps
            res["top_kernels_ms"] = [(k, tr.kernel_ns[k] / 1e6 / reps, tr.kernels[k] // reps)
                                     for k, _ in sorted(tr.kernel_ns.items(), key=lambda kv: -kv[1])[:8]]
            res["peak_rss_spyre_mb"] = _vm("VmHWM")
            if again:   # compile again in this process: Dynamo's and Inductor's caches warm
                for v in rec.values():
                    v.clear()
                torch._dynamo.reset()
                compiled = torch.compile(dev)
                t = time.perf_counter()
                compiled(**dkw)
                res["again"] = {"first_call_s": time.perf_counter() - t,
                                "compile": {k: list(v) for k, v in rec.items()}}
    # Not getrusage's ru_maxrss: after fork+exec it starts from the parent's RSS at the fork.
    out["peak_rss_process_mb"] = max(_PEAK[0], _vm("VmHWM"))
    print(MARK + json.dumps(out))


def run_worker(argv, env=None, timeout=1800) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, capture_output=True, text=True,
                       env=env, timeout=timeout)
    if p.returncode != 0 or MARK not in p.stdout:
        raise RuntimeError(f"worker {argv} failed:\n{p.stderr[-4000:]}")
    res = json.loads(p.stdout.split(MARK)[-1])
    res["process_wall_s"] = time.perf_counter() - t
    return res


def bench_models(names, quick: bool, threads: int, reps: int, keep_cache: str | None) -> dict:
    import models
    if not models.available():
        return {"skipped": "transformers is not installed (pip install transformers)"}
    cache = keep_cache or tempfile.mkdtemp(prefix="spyre-bench-")
    out = {"threads": threads, "reps": reps, "models": {}}
    try:
        for name in names:
            base = ["--_model", name, "--_threads", str(threads), "--_reps", str(reps),
                    "--_cache", os.path.join(cache, name)] + (["--quick"] if quick else [])
            m = {"desc": models.describe(name, quick)}
            if quick:
                # One process (saves two process starts): eager and Inductor CPU (with the user's Inductor
                # cache), then spyre with fresh caches, then spyre compiled again after a Dynamo reset.
                log(f"  {name}: eager CPU, Inductor CPU, spyre cold and warm in one process ...")
                p = run_worker(base + ["--_phases", "cpu,spyre", "--_again"])
                m["cpu"] = dict(p["cpu"], rss_after_imports_mb=p["rss_after_imports_mb"])
                m["spyre_cold"] = dict(p["spyre"], peak_rss_process_mb=p["peak_rss_process_mb"])
                c = m["spyre_cold"]
                m["spyre_warm"] = dict(c, compile=c["again"]["compile"], first_call_s=c["again"]["first_call_s"],
                                       warm="same process, after torch._dynamo.reset()")
            else:
                log(f"  {name}: eager CPU and Inductor CPU (the user's Inductor cache) ...")
                p = run_worker(base + ["--_phases", "cpu"])
                m["cpu"] = dict(p["cpu"], rss_after_imports_mb=p["rss_after_imports_mb"],
                                peak_rss_process_mb=p["peak_rss_process_mb"])
                log(f"  {name}: spyre, cold cache ...")
                p = run_worker(base + ["--_phases", "spyre"])
                m["spyre_cold"] = dict(p["spyre"], peak_rss_process_mb=p["peak_rss_process_mb"])
                log(f"  {name}: spyre, warm cache (a new process) ...")
                p = run_worker(base + ["--_phases", "spyre"])
                m["spyre_warm"] = dict(p["spyre"], peak_rss_process_mb=p["peak_rss_process_mb"],
                                       warm="new process, the cold run's cache directories")
            out["models"][name] = m
    finally:
        if keep_cache is None:
            shutil.rmtree(cache, ignore_errors=True)
    return out


def model_figures(m) -> dict:
    """Ratios of one model: wall medians and CPU-time minima; spyre = the better of its two runs
    (cold- and warm-cache processes in a full run)."""
    c, runs = m["cpu"], [m["spyre_cold"]["spyre"], m["spyre_warm"]["spyre"]]
    f = {"eager_ms": c["eager"]["median"] * 1e3, "inductor_ms": c["inductor_cpu"]["median"] * 1e3,
         "spyre_ms": min(r["median"] for r in runs) * 1e3}
    sp_cpu = min(r["cpu_min"] for r in runs)
    f["vs_inductor_wall"] = f["spyre_ms"] / f["inductor_ms"]
    f["vs_inductor_cpu"] = sp_cpu / c["inductor_cpu"]["cpu_min"]
    f["vs_eager_cpu"] = sp_cpu / c["eager"]["cpu_min"]
    f["inductor_vs_eager_cpu"] = c["inductor_cpu"]["cpu_min"] / c["eager"]["cpu_min"]
    return f


def print_models(res):
    if "skipped" in res:
        log("skipped: " + res["skipped"])
        return
    rows = []
    for name, m in res["models"].items():
        f = model_figures(m)
        target, met = verdict("model", f["vs_inductor_cpu"])
        rows.append([name, f"{f['eager_ms']:.1f}", f"{f['inductor_ms']:.1f}", f"{f['spyre_ms']:.1f}",
                     f"{f['vs_inductor_wall']:.2f}x", f"{f['vs_inductor_cpu']:.2f}x", f"{f['vs_eager_cpu']:.2f}x",
                     f"{f['inductor_vs_eager_cpu']:.2f}x", f"{m['spyre_cold']['max_abs_err']:.1e}", target, met])
    log(table(rows, ["model", "eager CPU ms", "Inductor CPU ms", "spyre ms", "spyre/Inductor wall",
                     "spyre/Inductor CPU", "spyre/eager CPU", "Inductor/eager CPU", "max err", "target",
                     "met (CPU)"]))
    for name, m in res["models"].items():
        w = m["spyre_warm"]
        log(f"  {name}: {m['desc']}; {w['kernels_per_call']} launches per call ({w['distinct_kernels']} kernels, "
            f"{w['kernel_ms_per_call']:.1f} ms inside launches), host fallbacks: {w['host_fallbacks'] or 'none'}")
        top = ", ".join(f"{k} {ms:.1f} ms/{n}" for k, ms, n in w["top_kernels_ms"][:4])
        log(f"    most time per call (host ms/launches): {top}")
    th = f"{res['threads']} host thread{'s' if res['threads'] > 1 else ''}"
    log(f"ms: medians of {res['reps']} calls after the first (wall); CPU: ratios of minimum process CPU time per "
        f"call, on which the\n  target is judged; {th} for all three; spyre = the better of its two runs "
        "(cold- and warm-cache)")

    log("\n(5) compile time: our TTIR->binary stages per kernel compiled while compiling the models")
    rows = []
    med = lambda v: f"{statistics.median(v) * 1e3:.1f}" if v else "-"
    mx = lambda v: f"{max(v) * 1e3:.1f}" if v else "-"
    for name, m in res["models"].items():
        for phase in ("spyre_cold", "spyre_warm"):
            c = m[phase]["compile"]
            per = [a + b for a, b in zip(c["spyreasm"], c["spyrebin"])]
            low = c["lower_module"]
            if phase == "spyre_cold":
                t1, m1 = verdict("lowering", statistics.median(per) * 1e3 if per else None)
            else:
                t1, m1 = verdict("warm", len(low) + len(per))
            rows.append([f"{name} {phase.split('_')[1]}", str(len(per)), med(per), mx(per), med(low), mx(low),
                         med(c["spyreasm"]), med(c["spyrebin"]), med(c["ttir"]), f"{m[phase]['first_call_s']:.1f}",
                         t1, m1])
        rows.append([f"{name} Inductor CPU", "", "", "", "", "", "", "", "", f"{m['cpu']['first_call_s']:.1f}", "", ""])
    log(table(rows, ["model / cache", "kernels", "TTIR->bin med ms", "TTIR->bin max ms", "lower med ms",
                     "lower max ms", "spyreasm med ms", "spyrebin med ms", "Triton ttir med ms", "first call s",
                     "target", "met"]))
    log("TTIR->bin = our stages spyreasm (parse TTIR, lower, allocate LX, print assembly) + spyrebin (assemble);"
        "\n  lower = lower_module alone; Triton ttir = Triton's own TTIR passes before our stages. The kernels include"
        "\n  the reductions' autotuning configs. first call = Dynamo + Inductor + compiles + one run (Inductor CPU:"
        "\n  with the user's Inductor cache as it is). warm: "
        + "; ".join(sorted({m["spyre_warm"]["warm"] for m in res["models"].values()})))

    log("\n(7) peak RSS per model subprocess (MB; device memory is host memory, so it is included)")
    rows = []
    for name, m in res["models"].items():
        rows.append([name, f"{m['cpu']['rss_after_imports_mb']:.0f}", f"{m['cpu']['peak_rss_eager_mb']:.0f}",
                     f"{m['cpu']['peak_rss_inductor_cpu_mb']:.0f}", f"{m['spyre_cold']['peak_rss_spyre_mb']:.0f}",
                     f"{m['spyre_warm']['peak_rss_spyre_mb']:.0f}", f"{m['spyre_cold']['peak_rss_process_mb']:.0f}"])
    log(table(rows, ["model", "after imports", "eager CPU", "Inductor CPU", "spyre cold", "spyre warm",
                     "spyre process max"]))
    log("each column the peak over that phase (VmHWM reset before it; Inductor CPU includes eager); the spyre "
        "process max\n  includes building the model and the CPU reference run")


# --- summary -------------------------------------------------------------------------------------
K_INFO: dict = {}   # kernel name -> shown for information only (filled in main)


def summary(results) -> list:
    rows = []
    k = results.get("kernels")
    if k:
        th = str(k["threads"][0])
        for r in k["rows"]:
            if r["info"]:
                continue
            kind, v, shown = kernel_verdict(r, th)
            what = "share of torch.mm" if kind == "matmul" else "time / torch"
            rows.append([f"(1) {r['kernel']} {what} ({th} thread, CPU time)", shown, *verdict(kind, v)])
    i = results.get("interp")
    if i:
        judged = [r for r in i["rows"] if not K_INFO.get(r["kernel"])]
        worst = min(judged, key=lambda r: r["speedup"])
        best = max(judged, key=lambda r: r["speedup"])
        below = [r for r in judged if r["speedup"] < 1000]
        torch_below = sum(r["torch_speedup"] < 1000 for r in below)
        rows.append([f"(2) vs TRITON_INTERPRET per element (worst: {worst['kernel']}, best: {best['kernel']} "
                     f"{best['speedup']:.0f}x; torch eager scores below 1000x on {torch_below} of the "
                     f"{len(below)} below)", f"{worst['speedup']:.0f}x", *verdict("interp", worst["speedup"])])
    m = results.get("models")
    if m and "models" in m:
        for name, mm in m["models"].items():
            f = model_figures(mm)
            rows.append([f"(3) {name} compiled: spyre / Inductor CPU ({m['threads']} thread, CPU time; "
                         f"wall {f['vs_inductor_wall']:.2f}x)", f"{f['vs_inductor_cpu']:.2f}x",
                         *verdict("model", f["vs_inductor_cpu"])])
    la = results.get("launch")
    if la:
        for key in la:
            if key.startswith("@triton.jit empty kernel, grid 1") or key.startswith("Inductor CachingAutotuner"):
                v = la[key]["median_us"]
                rows.append([f"(4) launch: {key.split(' (')[0]}", f"{v:.1f} us", *verdict("launch", v)])
    if m and "models" in m:
        per = [x + y for mm in m["models"].values()
               for x, y in zip(mm["spyre_cold"]["compile"]["spyreasm"], mm["spyre_cold"]["compile"]["spyrebin"])]
        low = [x for mm in m["models"].values() for x in mm["spyre_cold"]["compile"]["lower_module"]]
        warm = sum(len(mm["spyre_warm"]["compile"]["spyreasm"]) + len(mm["spyre_warm"]["compile"]["lower_module"])
                   for mm in m["models"].values())
        if per:
            v = statistics.median(per) * 1e3
            rows.append([f"(5) TTIR->binary per kernel, cold (median of {len(per)}; max {max(per) * 1e3:.0f} ms; "
                         f"lower_module alone {statistics.median(low) * 1e3:.1f} ms)", f"{v:.1f} ms",
                         *verdict("lowering", v)])
        rows.append(["(5) kernels compiled with a warm cache", str(warm), *verdict("warm", warm)])
    th = results.get("threads")
    if th:
        v = th["spyre"]["speedup"]
        rows.append([f"(6) matmul 2 threads vs 1 (torch.mm {th['torch.mm']['speedup']:.2f}x; "
                     f"{th['spyre']['cores_used_2']:.1f} cores obtained)", f"{v:.2f}x", *verdict("threads", v)])
    d = results.get("distributed")
    if d:
        big = [r for r in d["rows"] if r["bytes"] >= 1 << 20]
        if big:
            worst, bare = max(r["ratio"] for r in big), max(r["unchecked_ratio"] for r in big)
            rows.append([f"(7) collectives from 1 MB: spyreccl / gloo CPU, worst (without the ranks' agreement "
                         f"check {bare:.2f}x)", f"{worst:.2f}x", *verdict("collective", worst)])
    if m and "models" in m:
        for name, mm in m["models"].items():
            rows.append([f"(7) {name} peak RSS spyre (Inductor CPU {mm['cpu']['peak_rss_inductor_cpu_mb']:.0f} MB)",
                         f"{mm['spyre_cold']['peak_rss_spyre_mb']:.0f} MB", "(no target)", ""])
    return rows


# --- main ----------------------------------------------------------------------------------------
def main():
    global _JSON
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, one model: under a minute")
    ap.add_argument("--json", action="store_true", help="JSON on stdout; tables on stderr")
    ap.add_argument("--only", default="kernels,interp,launch,models,distributed",
                    help="comma-separated sections: kernels interp launch models distributed decode (decode is not in the default: "
                    "about 15 minutes on 2 cores)")
    ap.add_argument("--reps", type=int, default=0, help="repetitions per kernel timing (default 10, quick 5)")
    ap.add_argument("--threads", default="1,2", help="host thread counts for the kernel table (first one is "
                    "judged against the targets)")
    ap.add_argument("--model-threads", type=int, default=1, help="host threads for the model runs (default 1: "
                    "on a shared machine 1-thread CPU times are the stable figure)")
    ap.add_argument("--models", default="", help="comma-separated: gpt2,bert (default both; quick: gpt2)")
    ap.add_argument("--keep-cache", default=None, help="cache directory for the spyre model runs (kept)")
    # internal: subprocess workers
    ap.add_argument("--_interp", help=argparse.SUPPRESS)
    ap.add_argument("--_model", help=argparse.SUPPRESS)
    ap.add_argument("--_phases", help=argparse.SUPPRESS)
    ap.add_argument("--_cache", help=argparse.SUPPRESS)
    ap.add_argument("--_threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--_reps", type=int, default=3, help=argparse.SUPPRESS)
    ap.add_argument("--_again", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._interp:
        return interp_worker(args._interp, args._reps)
    if args._model:
        return model_worker(args._model, args._phases.split(","), args.quick, args._threads, args._reps,
                            args._again, args._cache)

    _JSON = args.json
    import torch
    import spyre_triton  # noqa: F401  (the device and the Triton backend)
    import bench_kernels as K

    K_INFO.update({n: c.info for n, c in K.KERNELS.items()})
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    mode = "quick" if args.quick else "full"
    reps = args.reps or (5 if args.quick else 10)
    threads = [int(t) for t in args.threads.split(",")]
    results = {"machine": machine(), "mode": mode, "load_start": loadavg(), "section_s": {}}
    sec = results["section_s"]
    m = results["machine"]
    log(f"spyre-triton benchmarks ({mode}), {m['date']}: {m['cpu']}, {m['cpus']} CPUs; torch {m['torch']}, "
        f"triton {m['triton']}; OMP_WAIT_POLICY={m['omp_wait_policy']}")
    log(f"commit {m['commit']}" + (f" with uncommitted changes in {', '.join(m['uncommitted_sources'])}"
                                    if m["uncommitted_sources"] else ""))
    log(f"load average at start (1/5/15 min): {results['load_start']}")

    if "kernels" in sections:
        log(f"\n(1) Triton kernels on spyre vs torch eager on the CPU (min of {reps}; threads {threads})")
        t = time.perf_counter()
        results["kernels"] = bench_kernels(K.SIZES[mode], reps, threads)
        print_kernels(results["kernels"])
        log("\n(6) 1 vs 2 host threads")
        results["threads"] = bench_threads(K.SIZES[mode]["matmul_f32"], reps)
        print_threads(results["threads"])
        sec["kernels"] = time.perf_counter() - t
    if "interp" in sections:
        log("\n(2) vs TRITON_INTERPRET=1")
        t = time.perf_counter()
        results["interp"] = bench_interp(mode, 1 if args.quick else 2)
        print_interp(results["interp"])
        sec["interp"] = time.perf_counter() - t
    if "launch" in sections:
        log("\n(4) launch overhead")
        t = time.perf_counter()
        results["launch"] = bench_launch(500 if args.quick else 3000)
        print_launch(results["launch"])
        sec["launch"] = time.perf_counter() - t
    if "decode" in sections:  # issue 23: benchmarks/bench_decode.py
        import bench_decode
        t = time.perf_counter()
        log("\n(decode) greedy generation, CPU time per token at 1 host thread")
        results["decode"] = bench_decode.run(bench_decode.MODELS, bench_decode.BACKENDS, 8 if args.quick else 16)
        log(bench_decode.table(results["decode"]))
        sec["decode"] = time.perf_counter() - t
    if "models" in sections:
        names = [n for n in (args.models or ("gpt2" if args.quick else "gpt2,bert")).split(",") if n]
        log(f"\n(3) compiled models ({args.model_threads} host thread{'s' if args.model_threads > 1 else ''})")
        t = time.perf_counter()
        results["models"] = bench_models(names, args.quick, args.model_threads, 3 if args.quick else 5,
                                         args.keep_cache)
        print_models(results["models"])
        sec["models"] = time.perf_counter() - t

    if "distributed" in sections:
        import bench_distributed as D
        log("\n(7) collectives over 2 ranks: spyreccl vs gloo on CPU tensors (host us; ratio: the median round), modelled on a drawer")
        t = time.perf_counter()
        results["distributed"] = D.run(args.quick, args.reps)
        D.report(results["distributed"], log)
        sec["distributed"] = time.perf_counter() - t

    results["load_end"] = loadavg()
    results["wall_s"] = time.perf_counter() - _T0   # from the start of this script, imports included
    rows = summary(results)
    results["summary"] = [{"figure": r[0], "measured": r[1], "target": r[2], "met": r[3]} for r in rows]
    log(f"\nTargets (load average {results['load_start']} at start, {results['load_end']} at end; "
        f"{results['wall_s']:.0f} s: " + ", ".join(f"{k} {v:.0f} s" for k, v in sec.items()) + ")")
    log(table(rows, ["figure", "measured", "target", "met"]))
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
