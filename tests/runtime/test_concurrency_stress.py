"""Concurrent launches from several host threads, each many programs wide (the runtime's worker pool),
with allocations and frees racing the launches: every result right. Also the ThreadSanitizer
selection of ./run.sh sanitize tsan."""
import threading

import torch
import triton
import triton.language as tl

DEV = "spyre"


@triton.jit
def axpb(X, O, a, b, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(O + i, tl.load(X + i, mask=m) * a + b, mask=m)


@triton.jit
def count_into(C, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(C + i % 16, 1, mask=i < n)


def run_jobs(threads, jobs_per_thread):
    errors, done = [], [0] * threads

    def worker(t):
        try:
            for j in range(jobs_per_thread):
                n = 1000 + 97 * ((t * 31 + j) % 50)
                x = torch.arange(n, dtype=torch.int32, device=DEV)
                out = torch.empty(n, dtype=torch.int32, device=DEV)  # allocated while others launch
                axpb[(triton.cdiv(n, 64),)](x, out, t + 2, j, n, BLOCK=64)
                want = torch.arange(n, dtype=torch.int32) * (t + 2) + j
                if not torch.equal(out.cpu(), want):
                    errors.append(f"thread {t} job {j}: wrong result")
                done[t] += 1
        except Exception as e:  # reported by the main thread
            errors.append(f"thread {t}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in ts), "a launch thread hung"
    return errors, sum(done)


def test_concurrent_launches_from_threads_are_all_right():
    errors, jobs = run_jobs(threads=4, jobs_per_thread=40)
    assert not errors, errors[:5]
    assert jobs == 160


def test_concurrent_atomics_from_threads_count_exactly():
    c = torch.zeros(16, dtype=torch.int32, device=DEV)
    n, launches, threads = 4096, 10, 4

    def worker():
        for _ in range(launches):
            count_into[(n // 128,)](c, n, BLOCK=128)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    assert torch.equal(c.cpu(), torch.full((16,), n // 16 * launches * threads, dtype=torch.int32))
