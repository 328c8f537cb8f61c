"""Regenerates docs/reliability.md: measures what it reports, on this machine, now.

    python tools/reliability_report.py [--kernels N] [--churn N] [--out docs/reliability.md]

Sections: the differential fuzzer per family (tools/fuzz.py), bad input and what each case ends in,
the sanitizer run (the summary ./run.sh sanitize leaves in build/sanitize/summary.txt), concurrent
launches from host threads, and the allocator under churn.
"""
import argparse
import datetime
import gc
import importlib.util
import os
import random
import subprocess
import threading
import time

import torch
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEV = "spyre"
MB = 1 << 20


def load_fuzz():
    spec = importlib.util.spec_from_file_location("spyre_tools_fuzz", os.path.join(HERE, "fuzz.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fuzz_section(n):
    fuzz = load_fuzz()
    t = time.time()
    results = fuzz.fuzz(n, seed=0)
    rows = fuzz.summary(results)
    lines = [f"{n} kernels (seeds 0..{n - 1}, `./run.sh fuzz {n}`), {time.time() - t:.0f} s. "
             "A mismatch is a spyre answer outside Triton's semantics; `known` is an open defect's pattern "
             "(" + ("; ".join(f"{k}: {v}" for k, v in fuzz.KNOWN_DEFECTS.items()) or "none is open") + "); an error is a kernel "
             "that raised on one side only.", "",
             "| family | kernels | ok | mismatch | known | error |", "|---|---|---|---|---|---|"]
    for fam, c in sorted(rows.items()):
        lines.append(f"| {fam} | {sum(c.values())} | {c['ok']} | {c['mismatch']} | {c['known']} | {c['error']} |")
    bad = [r for r in results if r.status in ("mismatch", "error")]
    for r in bad[:5]:
        lines.append(f"\n- {r.case.family} seed {r.case.seed}: {r.detail.splitlines()[0][:200]}")
    lines += ["", "Patterns the generator leaves out because Triton's interpreter gets them wrong:", ""]
    lines += [f"- `{k}`: {v}" for k, v in fuzz.INTERPRETER_BUGS.items()]
    return "\n".join(lines)


@triton.jit
def _copy(X, O, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(O + i, tl.load(X + i, mask=i < n), mask=i < n)


@triton.jit
def _gather(X, IDX, O, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(O + i, tl.load(X + tl.load(IDX + i)))


@triton.jit
def _store_shifted(O, delta, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(O + delta + i, tl.full([BLOCK], 1.0, tl.float32))


@triton.jit
def _fill_last_first(O, BLOCK: tl.constexpr):
    i = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
    tl.store(O + i, tl.full([BLOCK], 1.0, tl.float32))


def _untouched(run, victim):
    """Runs a launch that must fault; raises AssertionError if it wrote the neighbouring tensor."""
    victim.fill_(3.0)
    try:
        run()
    finally:
        if not bool(victim.eq(3.0).all()):
            raise AssertionError("the launch wrote the neighbouring tensor")


def _bad_input_cases():
    x = torch.arange(64, dtype=torch.float32, device=DEV)
    o = torch.empty(64, dtype=torch.float32, device=DEV)
    nb = torch.empty(64, dtype=torch.float32, device=DEV)
    return {
        "store through one argument offset into the next tensor (`O + delta`)": lambda: _untouched(
            lambda: _store_shifted[(1,)](o, (nb.data_ptr() - o.data_ptr()) // 4, BLOCK=64), nb),
        "unmasked store, grid 6 blocks too large, last block first": lambda: _untouched(
            lambda: _fill_last_first[(64 // 16 + 6,)](o, BLOCK=16), nb),
        "unmasked load past the end (grid one block too large)": lambda: _copy[(2,)](x, o, 64 + 64, BLOCK=64),
        "gather index far outside the tensor": lambda: _gather[(1,)](
            x, torch.full((64,), 1 << 20, dtype=torch.int32, device=DEV), o, BLOCK=64),
        "negative gather index": lambda: _gather[(1,)](
            x, torch.full((64,), -(1 << 12), dtype=torch.int32, device=DEV), o, BLOCK=64),
        "CPU tensor passed to a spyre launch": lambda: _copy[(1,)](x.cpu(), o, 64, BLOCK=64),
        "non-power-of-two block": lambda: _copy[(1,)](x, o, 64, BLOCK=48),
        "too few arguments": lambda: _copy[(1,)](x, o, BLOCK=64),
        "tensor on a device index that does not exist": lambda: torch.empty(4, device="spyre:99"),
        "allocation larger than the card": lambda: torch.empty(1 << 62, dtype=torch.uint8, device=DEV),
        "empty output tensor (no storage) written by a launch": lambda: _copy[(1,)](
            x, torch.empty(0, device=DEV), 64, BLOCK=64),
    }


def bad_input_section():
    lines = ["| case | outcome | device usable after |", "|---|---|---|"]
    for name, fn in _bad_input_cases().items():
        try:
            fn()
            outcome = "no error"
        except Exception as e:
            msg = [ln for ln in str(e).strip().splitlines() if ln.strip()]
            first = (msg[-1] if msg and msg[0].startswith("at ") else msg[0]) if msg else ""  # a compile error's cause
            outcome = f"`{type(e).__name__}`: {first[:200]}".replace("|", "\\|")
        x = torch.arange(64, dtype=torch.float32, device=DEV)
        o = torch.empty_like(x)
        _copy[(1,)](x, o, 64, BLOCK=64)
        usable = "yes" if torch.equal(o.cpu(), torch.arange(64, dtype=torch.float32)) else "NO"
        lines.append(f"| {name} | {outcome} | {usable} |")
    return "\n".join(lines)


MEMORY_SAFETY = """\
What a launch guarantees about device memory (runtime/dma.c, the base argument in docs/isa.md):

- Every `ld`, `st`, `gather`, `scatter`, `atom` and `acas`, and every direct access through a view register,
  is checked before any byte moves: its whole span once per tile, element by element only when the span
  fails (to name the first bad element). Masked-off elements are not touched and not checked.
- An access carries the pointer argument its addresses derive from whenever the compiler can tell
  (`spyre_triton/compiler/provenance.py`: through `addptr`, splats, broadcasts, reshapes, loop-carried and
  branch-passed pointers, calls; in practice every load and store of a kernel that does not load pointers
  from memory). It is checked against the allocation that argument points into, looked up once per launch,
  not against "any allocation": `O + delta` landing in the tensor next door faults, however close it sits.
- An access whose base the compiler cannot tell (a pointer loaded from memory, made from an integer, selected
  between two arguments) is checked against every live allocation of the device. Allocations under 64 KB keep
  a guard gap of at least `_runtime.GUARD_BYTES` (512) bytes that belongs to none, so such an access running
  off its tensor by less than that faults. Not guaranteed: one reaching further, or off a block of 64 KB or
  more (those are mapped, and may sit back to back), can land in another live tensor.
- The faulting instruction writes nothing. The first fault stops the launch: the other cores stop at their
  next program or backward branch. Programs that ran before the stop, or alongside it, complete; their
  accesses passed the same checks, so every byte a launch writes lies inside the allocation of the argument
  it was written through (of unknown base: inside some live allocation), whatever order the programs ran in.
- A pointer argument must point into a live allocation of the launch's device (one past its end counts) or
  be null (`None`, an empty tensor: any access through it faults); anything else is refused at launch.
- Stale pointers. Allocations are numbered, and a block freed and taken again is a new allocation. An
  argument whose allocation is freed while the launch runs (from another thread) faults its next access
  ("freed while the launch ran"), even when the block already belongs to a new tensor. An address saved
  from a freed tensor is refused at launch while its block is free or cached. Not detected: such an address
  passed after the block was reused; to the runtime it is a pointer into the new tensor, checked against
  that tensor's allocation. A torch tensor itself cannot be stale: it holds its storage.
- The `DeviceError` names the kernel, the source line, the program and element, the address, the argument
  (`arg`, None when its base is unknown) and its allocation (`allocation`; the nearest one when unknown).

Tests: `tests/runtime/test_per_tensor_bounds.py`."""


def sanitizer_section():
    path = os.path.join(ROOT, "build", "sanitize", "summary.txt")
    if not os.path.exists(path):
        out = "No ASan + UBSan run on this machine yet: `./run.sh sanitize` writes build/sanitize/summary.txt.\n"
    else:
        with open(path) as f:
            text = f.read().strip()
        out = ("`./run.sh sanitize` (runtime and device extension built with ASan + UBSan, "
               "`-fno-sanitize-recover=undefined`; any report aborts the run), its last result:\n\n```\n"
               + text + "\n```\n")
    tsan = os.path.join(ROOT, "build", "tsan", "summary.txt")
    if os.path.exists(tsan):  # written by ./run.sh sanitize tsan
        with open(tsan) as f:
            out += ("\n`./run.sh sanitize tsan`: ThreadSanitizer over the allocation table (tools/devmem_stress.c) and "
                    "the worker pool (tools/tsan_launch.py: the runtime built with -fsanitize=thread, four Python "
                    "threads launching add, softmax and a tiled matmul at 1, 2 and 4 cores, results checked), "
                    "its last result:\n\n```\n" + f.read().strip() + "\n```\n")
    else:
        out += "\nNo ThreadSanitizer run on this machine yet: `./run.sh sanitize tsan` writes build/tsan/summary.txt.\n"
    return out


def concurrency_section(threads=4, seconds=10.0):
    count = [0] * threads
    wrong = []
    stop = time.time() + seconds

    def worker(t):
        j = 0
        while time.time() < stop:
            n = 1000 + 97 * ((t * 31 + j) % 50)
            x = torch.arange(n, dtype=torch.float32, device=DEV)
            o = torch.empty_like(x)
            _copy[(triton.cdiv(n, 64),)](x, o, n, BLOCK=64)
            if not torch.equal(o.cpu(), torch.arange(n, dtype=torch.float32)):
                wrong.append((t, j))
            count[t] += 1
            j += 1

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (f"{threads} host threads launching copy kernels (16-90 programs each, allocating their tensors "
            f"as they go) for {seconds:.0f} s: {sum(count)} launches, {len(wrong)} wrong.")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def churn_section(n):
    torch.spyre.empty_cache()
    gc.collect()
    base = rss()
    rng = random.Random(0)
    live, max_live, peak = [None] * 64, 0, 0
    t = time.time()
    for k in range(n):
        x = torch.empty(int(2 ** rng.uniform(0, 22)), dtype=torch.uint8, device=DEV)
        x.fill_(1)
        live[rng.randrange(64)] = x
        if k % 50 == 0:
            max_live = max(max_live, sum(v.numel() for v in live if v is not None))
            peak = max(peak, rss() - base)
    secs = time.time() - t
    live = x = None
    gc.collect()
    held = rss() - base
    torch.spyre.empty_cache()
    after = rss() - base
    return (f"{n} allocations of 1 B-4 MiB (log-uniform), 64 live, each filled: RSS peak {peak / MB:.1f} MB "
            f"above the start for at most {max_live / MB:.1f} MB live ({peak / max(max_live, 1):.1f}x), "
            f"{secs / n * 1e6:.0f} us per allocation and fill; {held / MB:.1f} MB held once all are freed, "
            f"{after / MB:.1f} MB after `empty_cache()`.")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=400)
    ap.add_argument("--churn", type=int, default=10000)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "reliability.md"))
    opts = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    sections = [
        ("Differential fuzzing", fuzz_section(opts.kernels)),
        ("Memory safety", MEMORY_SAFETY),
        ("Bad input", bad_input_section()),
        ("Sanitizers", sanitizer_section()),
        ("Concurrency", concurrency_section()),
        ("Allocator churn", churn_section(opts.churn)),
    ]
    text = (f"# Reliability\n\nGenerated by `python tools/reliability_report.py` at {commit} on "
            f"{datetime.date.today()} ({os.cpu_count()} CPUs); rerun it to refresh every figure.\n")
    for title, body in sections:
        text += f"\n## {title}\n\n{body}\n"
    with open(opts.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
