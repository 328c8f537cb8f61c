"""Atomics on spyre: tl.atomic_add/max/min/and/or/xor/xchg/cas against a Python reference.

Covers every dtype Triton's semantic.py allows per op (add: i32 u32 i64 u64 f16 bf16 f32 f64; max/min:
i32 u32 i64 u64 f32 f64, floats through Triton's signed-max/unsigned-min split; and/or/xor: i32 u32 i64 u64;
xchg: i32 u32 i64 u64 f32 f64; cas: every 16/32/64-bit type), each `sem` and `scope`, tensor and scalar
forms, masked and unmasked, the returned old values, the dtypes Triton refuses, and real atomicity: many
programs on the 32 simulated cores contending on one or a few addresses (counters, exchange chains, a
compare-and-swap lock-free counter and a cas spin lock protecting a plain load/store increment).

Values are compared bit for bit (floats too: every test value makes the float result exact).
Lowering: spyre_triton/compiler/ops.py (tt.atomic_rmw, tt.atomic_cas); runtime: runtime/dma.c.
"""
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE
N = 16  # elements per tensor-form case

I32, U32, I64, U64 = torch.int32, torch.uint32, torch.int64, torch.uint64
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
I16, U16 = torch.int16, torch.uint16

ALLOWED = {
    "add": [I32, U32, I64, U64, F16, BF16, F32, F64],
    "max": [I32, U32, I64, U64, F32, F64],
    "min": [I32, U32, I64, U64, F32, F64],
    "and": [I32, U32, I64, U64],
    "or": [I32, U32, I64, U64],
    "xor": [I32, U32, I64, U64],
    "xchg": [I32, U32, I64, U64, F32, F64],
}
CAS_DTYPES = [I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64]
SEMS = ["relaxed", "acquire", "release", "acq_rel"]
SCOPES = ["gpu", "cta", "sys"]
# Every sem with the default scope and every other scope with the default sem, not the product: the
# lowering reads neither (every atomic is a sequentially consistent compare-and-exchange,
# runtime/dma.c), so these cases check that each value is accepted and the result is unchanged.
SEM_SCOPE = [pytest.param(sem, "gpu", id=f"{sem}-gpu") for sem in SEMS] + \
            [pytest.param("acq_rel", scope, id=f"acq_rel-{scope}") for scope in SCOPES if scope != "gpu"]

_INT_OF = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _name(dt):
    return str(dt).replace("torch.", "")


def bits(t):
    """Raw bits of a tensor as Python ints (unsigned)."""
    es = t.element_size()
    raw = t.contiguous().view(_INT_OF[es]).tolist()
    return [v & ((1 << (8 * es)) - 1) for v in raw]


def from_bits(values, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    w = 8 * es
    signed = [v - (1 << w) if v >= 1 << (w - 1) else v for v in values]
    return torch.tensor(signed, dtype=_INT_OF[es] if es > 1 else torch.int8).view(dtype)


def to_py(t):
    """Exact Python values: ints for integer dtypes (unsigned ones unsigned), floats for float dtypes."""
    if t.dtype.is_floating_point:
        return t.double().tolist()
    b = bits(t)
    if t.dtype in (U16, U32, U64):
        return b
    w = 8 * t.element_size()
    return [v - (1 << w) if v >= 1 << (w - 1) else v for v in b]


def from_py(values, dtype):
    if dtype.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(dtype)
    es = torch.empty((), dtype=dtype).element_size()
    return from_bits([v & ((1 << (8 * es)) - 1) for v in values], dtype)


def _rmw_ref(op, old, v, dtype):
    """New memory value of one atomic op, on exact Python values."""
    if op == "add":
        if dtype.is_floating_point:
            return old + v  # every test sum is exact in the dtype
        w = 8 * torch.empty((), dtype=dtype).element_size()
        r = (old + v) & ((1 << w) - 1)
        return r - (1 << w) if dtype not in (U32, U64) and r >= 1 << (w - 1) else r
    if op in ("max", "min"):
        if dtype.is_floating_point and old == v == 0.0:
            # -0.0 < +0.0 for Triton's float max/min (the IEEE maximum/minimum order)
            import math
            neg_old, neg_v = math.copysign(1, old) < 0, math.copysign(1, v) < 0
            if op == "max":
                return old if not neg_old else v
            return old if neg_old else v
        return max(old, v) if op == "max" else min(old, v)
    if op == "and":
        return old & v
    if op == "or":
        return old | v
    if op == "xor":
        return old ^ v
    return v  # xchg


def _values(dtype, n, seed):
    """n test values of dtype as exact Python values, spanning signs and (for unsigned) the top bit."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        v = (torch.randint(-40, 40, (n,), generator=g).double() / 4).tolist()
        if n >= 2:
            v[0], v[1] = 0.0, -0.0
        return v
    w = 8 * torch.empty((), dtype=dtype).element_size()
    if dtype in (U16, U32, U64):
        lo, hi = 0, (1 << w) - 1
    else:
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    small = torch.randint(-50, 50, (n,), generator=g).tolist()
    big = [int(x) for x in torch.randint(0, 1 << 62, (n,), generator=g).tolist()]
    out = []
    for i in range(n):
        if i % 3 == 0:  # large magnitudes: wraparound for add, the top bit for unsigned compares
            x = (big[i] * 4 + i) & ((1 << w) - 1)
            x = x - (1 << w) if lo < 0 and x >= 1 << (w - 1) else x
        else:
            x = small[i] % (hi + 1) if lo == 0 else small[i]
        out.append(max(lo, min(hi, x)))
    return out


# -- every op x every allowed dtype x tensor/scalar x masked/unmasked -------------------------------
@triton.jit
def _rmw(p, v, m, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    if OP == "add":
        r = tl.atomic_add(p, v, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "max":
        r = tl.atomic_max(p, v, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "min":
        r = tl.atomic_min(p, v, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "and":
        r = tl.atomic_and(p, v, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "or":
        r = tl.atomic_or(p, v, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        r = tl.atomic_xor(p, v, mask=m, sem=SEM, scope=SCOPE)
    else:
        r = tl.atomic_xchg(p, v, mask=m, sem=SEM, scope=SCOPE)
    return r


@triton.jit
def _rmw_nomask(p, v, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    if OP == "add":
        r = tl.atomic_add(p, v, sem=SEM, scope=SCOPE)
    elif OP == "max":
        r = tl.atomic_max(p, v, sem=SEM, scope=SCOPE)
    elif OP == "min":
        r = tl.atomic_min(p, v, sem=SEM, scope=SCOPE)
    elif OP == "and":
        r = tl.atomic_and(p, v, sem=SEM, scope=SCOPE)
    elif OP == "or":
        r = tl.atomic_or(p, v, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        r = tl.atomic_xor(p, v, sem=SEM, scope=SCOPE)
    else:
        r = tl.atomic_xchg(p, v, sem=SEM, scope=SCOPE)
    return r


@triton.jit
def rmw_tensor_kernel(mem_ptr, val_ptr, old_ptr, OP: tl.constexpr, MASKED: tl.constexpr, SEM: tl.constexpr,
                      SCOPE: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    v = tl.load(val_ptr + offs)
    if MASKED:
        r = _rmw(mem_ptr + offs, v, offs % 3 != 1, OP, SEM, SCOPE)
    else:
        r = _rmw_nomask(mem_ptr + offs, v, OP, SEM, SCOPE)
    tl.store(old_ptr + offs, r)


@triton.jit
def rmw_scalar_kernel(mem_ptr, val_ptr, old_ptr, OP: tl.constexpr, MASKED: tl.constexpr, SEM: tl.constexpr,
                      SCOPE: tl.constexpr):
    pid = tl.program_id(0)  # one program per element: scalar pointer, scalar value, scalar mask
    v = tl.load(val_ptr + pid)
    if MASKED:
        r = _rmw(mem_ptr + pid, v, pid % 3 != 1, OP, SEM, SCOPE)
    else:
        r = _rmw_nomask(mem_ptr + pid, v, OP, SEM, SCOPE)
    tl.store(old_ptr + pid, r)


def run_rmw(op, dtype, form, masked, sem="acq_rel", scope="gpu"):
    init = _values(dtype, N, 1)
    vals = _values(dtype, N, 2)
    if dtype.is_floating_point:
        vals[0], vals[1] = -0.0, 0.0  # against init's +0.0 and -0.0: max/min order -0.0 below +0.0
    if op == "add" and dtype.is_floating_point:
        vals = [v / 2 for v in vals]
    mem = from_py(init, dtype).to(DEVICE)
    old = torch.zeros(N, dtype=dtype, device=DEVICE)
    args = (mem, from_py(vals, dtype).to(DEVICE), old)
    if form == "tensor":
        rmw_tensor_kernel[(1,)](*args, OP=op, MASKED=masked, SEM=sem, SCOPE=scope, N=N)
    else:
        rmw_scalar_kernel[(N,)](*args, OP=op, MASKED=masked, SEM=sem, SCOPE=scope)
    active = [not masked or i % 3 != 1 for i in range(N)]
    ref = [_rmw_ref(op, o, v, dtype) if a else o for o, v, a in zip(init, vals, active)]
    got = mem.cpu()
    assert bits(got) == bits(from_py(ref, dtype)), (to_py(got), ref)
    got_old = bits(old.cpu())
    want_old = bits(from_py(init, dtype))
    # the old value is defined only where the mask is set
    assert [g for g, a in zip(got_old, active) if a] == [w for w, a in zip(want_old, active) if a]


RMW_CASES = [pytest.param(op, dt, id=f"{op}-{_name(dt)}") for op, dts in ALLOWED.items() for dt in dts]


@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
@pytest.mark.parametrize("form", ["tensor", "scalar"])
@pytest.mark.parametrize("op,dtype", RMW_CASES)
def test_rmw_every_op_and_dtype(op, dtype, form, masked):
    run_rmw(op, dtype, form, masked)


@pytest.mark.parametrize("sem,scope", SEM_SCOPE)
@pytest.mark.parametrize("op", ["add", "and"])
def test_rmw_accepts_every_sem_and_scope(op, sem, scope):
    run_rmw(op, torch.float32 if op == "add" else torch.int32, "tensor", True, sem, scope)


@triton.jit
def rmw_broadcast_kernel(mem_ptr, old_ptr, x, N: tl.constexpr):
    offs = tl.arange(0, N)
    # a scalar value and a scalar mask broadcast against a tensor of pointers
    r = tl.atomic_add(mem_ptr + offs, x, mask=x > 0)
    tl.store(old_ptr + offs, r)
    # a tensor of values into one address (every pointer the same): each element sees the ones before it
    r2 = tl.atomic_add(mem_ptr + N + offs * 0, offs + 1)
    tl.store(old_ptr + N + offs, r2)


def test_scalar_value_and_mask_broadcast_and_tensor_into_one_address():
    mem = torch.zeros(N + 1, dtype=torch.int32, device=DEVICE)
    old = torch.full((2 * N,), -1, dtype=torch.int32, device=DEVICE)
    rmw_broadcast_kernel[(1,)](mem, old, 5, N=N)
    assert mem.cpu().tolist() == [5] * N + [N * (N + 1) // 2]
    o = old.cpu().tolist()
    assert o[:N] == [0] * N
    assert sorted(o[N:]) == sorted(k * (k + 1) // 2 for k in range(N))  # prefix sums, in some order
    mem.zero_()
    rmw_broadcast_kernel[(1,)](mem, old, 0, N=N)  # mask false everywhere: nothing written
    assert mem.cpu().tolist()[:N] == [0] * N


# -- compare-and-swap ------------------------------------------------------------------------------
@triton.jit
def cas_tensor_kernel(mem_ptr, cmp_ptr, val_ptr, old_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr,
                      N: tl.constexpr):
    offs = tl.arange(0, N)
    r = tl.atomic_cas(mem_ptr + offs, tl.load(cmp_ptr + offs), tl.load(val_ptr + offs), sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, r)


@triton.jit
def cas_scalar_kernel(mem_ptr, cmp_ptr, val_ptr, old_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.atomic_cas(mem_ptr + pid, tl.load(cmp_ptr + pid), tl.load(val_ptr + pid), sem=SEM, scope=SCOPE)
    tl.store(old_ptr + pid, r)


def run_cas(dtype, form, sem="acq_rel", scope="gpu"):
    init = from_py(_values(dtype, N, 3), dtype)
    cmp = init.clone()
    cmp[1::2] = from_py(_values(dtype, N, 4), dtype)[1::2]  # odd elements: a different value
    if dtype.is_floating_point:
        init[2], cmp[2] = 0.0, -0.0  # cas compares bits: -0.0 does not match +0.0
        init[4], cmp[4] = float("nan"), float("nan")  # and the same NaN bits do match
    val = from_py(_values(dtype, N, 5), dtype)
    mem, old = init.to(DEVICE), torch.zeros(N, dtype=dtype, device=DEVICE)
    args = (mem, cmp.to(DEVICE), val.to(DEVICE), old)
    if form == "tensor":
        cas_tensor_kernel[(1,)](*args, SEM=sem, SCOPE=scope, N=N)
    else:
        cas_scalar_kernel[(N,)](*args, SEM=sem, SCOPE=scope)
    bi, bc, bv = bits(init), bits(cmp), bits(val)
    assert bits(mem.cpu()) == [v if i == c else i for i, c, v in zip(bi, bc, bv)]
    assert bits(old.cpu()) == bi


@pytest.mark.parametrize("form", ["tensor", "scalar"])
@pytest.mark.parametrize("dtype", CAS_DTYPES, ids=_name)
def test_cas_every_dtype(dtype, form):
    run_cas(dtype, form)


@pytest.mark.parametrize("sem,scope", SEM_SCOPE)
def test_cas_accepts_every_sem_and_scope(sem, scope):
    run_cas(torch.int64, "tensor", sem, scope)


# -- what Triton refuses ---------------------------------------------------------------------------
@triton.jit
def any_atomic_kernel(mem_ptr, OP: tl.constexpr):
    offs = tl.arange(0, 4)
    v = tl.load(mem_ptr + offs)
    if OP == "cas":
        tl.atomic_cas(mem_ptr + offs, v, v)
    elif OP == "add":
        tl.atomic_add(mem_ptr + offs, v)
    elif OP == "max":
        tl.atomic_max(mem_ptr + offs, v)
    elif OP == "min":
        tl.atomic_min(mem_ptr + offs, v)
    elif OP == "and":
        tl.atomic_and(mem_ptr + offs, v)
    elif OP == "or":
        tl.atomic_or(mem_ptr + offs, v)
    elif OP == "xor":
        tl.atomic_xor(mem_ptr + offs, v)
    else:
        tl.atomic_xchg(mem_ptr + offs, v)


@pytest.mark.parametrize("op,dtype,message", [
    ("add", torch.int16, "atomic_add does not support int16"),
    ("add", torch.int8, "atomic_add does not support int8"),
    ("add", torch.bool, "atomic_add does not support int1"),
    ("max", torch.float16, "atomic_max does not support fp16"),
    ("min", torch.bfloat16, "atomic_min does not support bf16"),
    ("xchg", torch.float16, "atomic_xchg does not support fp16"),
    ("xor", torch.uint8, "atomic_xor does not support uint8"),
    ("cas", torch.int8, "atomic_cas only supports elements with width"),
], ids=lambda x: _name(x) if isinstance(x, torch.dtype) else (x if len(x) <= 4 else ""))
def test_dtypes_triton_refuses(op, dtype, message):
    with pytest.raises(triton.CompilationError, match=message):
        any_atomic_kernel[(1,)](torch.zeros(4, dtype=dtype, device=DEVICE), OP=op)


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise_atomics_on_floats_are_refused(op):
    # Triton's front end lets a float through to tt.atomic_rmw; no target can do a bitwise float atomic
    # (LLVM's atomicrmw and/or/xor are integer-only). Spyre must refuse it with a message, not compute.
    mem = torch.zeros(4, dtype=torch.float32, device=DEVICE)
    with pytest.raises(Exception, match="not supported"):
        any_atomic_kernel[(1,)](mem, OP=op)


# -- real atomicity: many programs on few addresses ------------------------------------------------
@triton.jit
def counter_kernel(cnt_ptr, old_ptr, ONE_F: tl.constexpr):
    pid = tl.program_id(0)
    if ONE_F:
        r = tl.atomic_add(cnt_ptr, 1.0)
    else:
        r = tl.atomic_add(cnt_ptr, 1)
    tl.store(old_ptr + pid, r)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.int64])
def test_4096_programs_add_into_one_address(dtype):
    P = 4096
    cnt = torch.zeros(1, dtype=dtype, device=DEVICE)
    old = torch.full((P,), -1, dtype=dtype, device=DEVICE)
    counter_kernel[(P,)](cnt, old, ONE_F=dtype.is_floating_point)
    assert cnt.item() == P
    # every program saw a distinct count: the returned old values are a permutation of 0..P-1
    assert sorted(old.cpu().long().tolist()) == list(range(P))


@triton.jit
def tensor_contention_kernel(cnt_ptr, old_ptr, SLOTS: tl.constexpr, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    r = tl.atomic_add(cnt_ptr + offs % SLOTS, 1, mask=offs < B - 1)  # the last lane never adds
    tl.store(old_ptr + pid * B + offs, r, mask=offs < B - 1)


def test_tensor_atomics_from_many_programs_on_four_addresses():
    P, B, SLOTS = 512, 32, 4
    cnt = torch.zeros(SLOTS, dtype=torch.int32, device=DEVICE)
    old = torch.full((P * B,), -1, dtype=torch.int32, device=DEVICE)
    tensor_contention_kernel[(P,)](cnt, old, SLOTS=SLOTS, B=B)
    per_slot = [sum(1 for i in range(B - 1) if i % SLOTS == s) * P for s in range(SLOTS)]
    assert cnt.cpu().tolist() == per_slot
    o = old.cpu().view(P, B)
    for s in range(SLOTS):
        lanes = [i for i in range(B - 1) if i % SLOTS == s]
        assert sorted(o[:, lanes].flatten().tolist()) == list(range(per_slot[s]))


@triton.jit
def xchg_chain_kernel(slot_ptr, old_ptr):
    pid = tl.program_id(0)
    tl.store(old_ptr + pid, tl.atomic_xchg(slot_ptr, pid + 1))


def test_exchange_chain_loses_and_duplicates_nothing():
    P = 2048
    slot = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    old = torch.full((P,), -1, dtype=torch.int64, device=DEVICE)
    xchg_chain_kernel[(P,)](slot, old)
    # each value 0..P was seen exactly once: P of them returned, the last one left in the slot
    assert sorted(old.cpu().tolist() + [slot.item()]) == list(range(P + 1))


@triton.jit
def minmax_contention_kernel(mx_ptr, mn_ptr, val_ptr):
    v = tl.load(val_ptr + tl.program_id(0))
    tl.atomic_max(mx_ptr, v)
    tl.atomic_min(mn_ptr, v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint32], ids=_name)
def test_max_min_contention(dtype):
    P = 2048
    vals = from_py(_values(dtype, P, 7), dtype)
    if dtype.is_floating_point:
        vals = torch.randn(P, generator=torch.Generator().manual_seed(3)).to(dtype) * 100
    mx = from_py([_values(dtype, 1, 8)[0]], dtype).to(DEVICE)
    mn = mx.clone()
    start = to_py(mx.cpu())[0]
    minmax_contention_kernel[(P,)](mx, mn, vals.to(DEVICE))
    assert to_py(mx.cpu())[0] == max(to_py(vals) + [start])
    assert to_py(mn.cpu())[0] == min(to_py(vals) + [start])


@triton.jit
def cas_counter_kernel(cnt_ptr):
    # a lock-free increment: read, then compare-and-swap until nobody got there first
    done = False
    while not done:
        cur = tl.load(cnt_ptr, volatile=True)
        done = tl.atomic_cas(cnt_ptr, cur, cur + 1) == cur


def test_cas_loop_counter():
    P = 1024
    cnt = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    cas_counter_kernel[(P,)](cnt)
    assert cnt.item() == P


@triton.jit
def spin_lock_kernel(lock_ptr, cnt_ptr, order_ptr, REPS: tl.constexpr):
    for _ in range(REPS):
        while tl.atomic_cas(lock_ptr, 0, 1, sem="acquire") == 1:
            pass
        # the critical section: a plain, non-atomic read-modify-write of two words
        c = tl.load(cnt_ptr, volatile=True)
        tl.store(order_ptr + c, tl.program_id(0))
        tl.store(cnt_ptr, c + 1)
        tl.atomic_xchg(lock_ptr, 0, sem="release")


def test_cas_spin_lock_protects_a_non_atomic_increment():
    P, REPS = 256, 4
    lock = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    cnt = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    order = torch.full((P * REPS,), -1, dtype=torch.int32, device=DEVICE)
    spin_lock_kernel[(P,)](lock, cnt, order, REPS=REPS)
    assert cnt.item() == P * REPS and lock.item() == 0
    # no two programs were inside at once: every slot written once, each program REPS times
    assert sorted(order.cpu().tolist()) == sorted(list(range(P)) * REPS)


# -- addresses computed from data: a tile of pointers, and a returned old value used as an index ---
@triton.jit
def histogram_kernel(idx_ptr, hist_ptr, old_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(old_ptr + offs, tl.atomic_add(hist_ptr + i, 1, mask=m), mask=m)


def test_histogram_through_loaded_indices():
    n, bins = 3000, 10
    idx = torch.randint(0, bins, (n,), dtype=torch.int32, generator=torch.Generator().manual_seed(4))
    hist = torch.zeros(bins, dtype=torch.int32, device=DEVICE)
    old = torch.full((n,), -1, dtype=torch.int32, device=DEVICE)
    histogram_kernel[(triton.cdiv(n, 128),)](idx.to(DEVICE), hist, old, n, B=128)
    assert hist.cpu().tolist() == torch.bincount(idx, minlength=bins).tolist()
    o = old.cpu()
    for k in range(bins):  # within a bin the old values are 0, 1, 2, ... in some order
        assert sorted(o[idx == k].tolist()) == list(range(int((idx == k).sum())))


@triton.jit
def ticket_kernel(cnt_ptr, out_ptr):
    slot = tl.atomic_add(cnt_ptr, 1)  # a ticket: the old value is this program's slot
    tl.store(out_ptr + slot, tl.program_id(0))


def test_returned_old_value_as_a_store_index():
    P = 3000
    cnt = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    out = torch.full((P,), -1, dtype=torch.int32, device=DEVICE)
    ticket_kernel[(P,)](cnt, out)
    assert sorted(out.cpu().tolist()) == list(range(P))


@triton.jit
def cas_2d_kernel(mem_ptr, old_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(old_ptr + offs, tl.atomic_cas(mem_ptr + offs, offs % 2, offs + 100))


def test_cas_on_a_2d_tile():
    init = torch.randint(0, 2, (4, 8), dtype=torch.int32)
    mem, old = init.to(DEVICE), torch.empty(4, 8, dtype=torch.int32, device=DEVICE)
    cas_2d_kernel[(1,)](mem, old, M=4, N=8)
    offs = torch.arange(32, dtype=torch.int32).view(4, 8)
    assert torch.equal(mem.cpu(), torch.where(init == offs % 2, offs + 100, init))
    assert torch.equal(old.cpu(), init)


@triton.jit
def masked_tail_kernel(mem_ptr, n, OP: tl.constexpr, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    # the masked-off lanes point past the end of the allocation: they must be neither done nor checked
    if OP == "add":
        tl.atomic_add(mem_ptr + offs, 1, mask=offs < n)
    elif OP == "max":
        tl.atomic_max(mem_ptr + offs, offs, mask=offs < n)
    else:
        tl.atomic_xchg(mem_ptr + offs, offs * 2, mask=offs < n)


@pytest.mark.parametrize("op", ["add", "max", "xchg"])
def test_masked_off_lanes_past_the_allocation(op):
    n = 100
    mem = torch.zeros(n, dtype=torch.int32, device=DEVICE)
    masked_tail_kernel[(2,)](mem, n, OP=op, B=64)
    ar = torch.arange(n, dtype=torch.int32)
    assert torch.equal(mem.cpu(), {"add": torch.ones(n, dtype=torch.int32), "max": ar, "xchg": ar * 2}[op])
