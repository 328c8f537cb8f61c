"""Control flow on spyre: tl.range and its options (num_stages, loop_unroll_factor, disallow_acc_multi_buffer,
flatten, warp_specialize, disable_licm), negative and runtime steps, zero-trip loops, tl.static_range,
scf.while carrying tensors and tuples, scf.if yielding values, early returns in kernels and in functions,
noinline functions, constexpr specialisation (values, dtypes, None, static_assert), integer specialisation
and do_not_specialize, 1-D/2-D/3-D grids larger than the 32 cores, tl.num_programs and persistent loops.

Every case compares with the same computation in Python or torch on the CPU.
"""
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE


def dev(t):
    return t.to(DEVICE)


def compiled_variants(kernel):
    return sum(len(c[0]) for c in kernel.device_caches.values())


# -- tl.range options ------------------------------------------------------------------------------
@triton.jit
def range_options_kernel(x_ptr, out_ptr, lo, hi, step, OPT: tl.constexpr, B: tl.constexpr):
    offs = tl.arange(0, B)
    acc = tl.zeros((B,), tl.float32)
    cnt = 0
    if OPT == "plain":
        for i in tl.range(lo, hi, step):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "num_stages0":
        for i in tl.range(lo, hi, step, num_stages=0):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "num_stages3":
        for i in tl.range(lo, hi, step, num_stages=3):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "unroll2":
        for i in tl.range(lo, hi, step, loop_unroll_factor=2):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "unroll3":
        for i in tl.range(lo, hi, step, loop_unroll_factor=3):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "unroll1":
        for i in tl.range(lo, hi, step, loop_unroll_factor=1):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "disallow_acc_multi_buffer":
        for i in tl.range(lo, hi, step, disallow_acc_multi_buffer=True):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "warp_specialize":
        for i in tl.range(lo, hi, step, warp_specialize=True):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    elif OPT == "disable_licm":
        for i in tl.range(lo, hi, step, disable_licm=True):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    else:  # "all": every option at once
        for i in tl.range(lo, hi, step, num_stages=2, loop_unroll_factor=4, disallow_acc_multi_buffer=True):
            acc += tl.load(x_ptr + i * B + offs) * (i + 1)
            cnt += 1
    tl.store(out_ptr + offs, acc + cnt * 1000)


RANGE_OPTS = ["plain", "num_stages0", "num_stages3", "unroll1", "unroll2", "unroll3", "disallow_acc_multi_buffer",
              "warp_specialize", "disable_licm", "all"]


@pytest.mark.parametrize("lo,hi,step", [(0, 10, 1), (3, 17, 3), (0, 0, 1), (5, 2, 1), (0, 7, 2)],
                         ids=["0-10", "3-17-by3", "empty", "backwards-bounds", "odd-by2"])
@pytest.mark.parametrize("opt", RANGE_OPTS)
def test_range_options(opt, lo, hi, step):
    B = 16
    x = torch.randint(-5, 6, (20, B)).float()
    out = torch.empty(B, device=DEVICE)
    range_options_kernel[(1,)](dev(x), out, lo, hi, step, OPT=opt, B=B)
    idx = list(range(lo, hi, step))
    ref = sum((x[i] * (i + 1) for i in idx), torch.zeros(B)) + 1000 * len(idx)
    assert torch.equal(out.cpu(), ref)


@triton.jit
def flatten_kernel(out_ptr, M, N, FLATTEN: tl.constexpr):
    acc = 0
    if FLATTEN:
        for i in tl.range(0, M, flatten=True):
            for j in tl.range(0, N):
                acc += (i + 1) * (j + 2)
                tl.store(out_ptr + i * N + j, acc)
    else:
        for i in tl.range(0, M):
            for j in tl.range(0, N):
                acc += (i + 1) * (j + 2)
                tl.store(out_ptr + i * N + j, acc)


@pytest.mark.parametrize("flatten", [False, True])
@pytest.mark.parametrize("M,N", [(3, 5), (4, 0), (1, 7)])
def test_nested_loops_and_flatten(M, N, flatten):
    out = torch.full((max(M * N, 1),), -1, dtype=torch.int32, device=DEVICE)
    flatten_kernel[(1,)](out, M, N, FLATTEN=flatten)
    ref, acc = [], 0
    for i in range(M):
        for j in range(N):
            acc += (i + 1) * (j + 2)
            ref.append(acc)
    assert out.cpu().tolist()[:M * N] == ref


@triton.jit
def steps_kernel(out_ptr, n, KIND: tl.constexpr):
    k = 0
    if KIND == "neg1":
        for i in range(n, 0, -1):
            tl.store(out_ptr + k, i)
            k += 1
    elif KIND == "neg3":
        for i in range(n, 1, -3):
            tl.store(out_ptr + k, i)
            k += 1
    elif KIND == "runtime_step":
        for i in range(1, 2 * n, n // 3):
            tl.store(out_ptr + k, i)
            k += 1
    elif KIND == "static_neg":
        for i in tl.static_range(9, -1, -4):
            tl.store(out_ptr + k, i)
            k += 1
    else:  # triangular: the inner bound is the outer index
        for i in range(n):
            for j in range(i):
                tl.store(out_ptr + k, i * 100 + j)
                k += 1
    tl.store(out_ptr + 99, k)


@pytest.mark.parametrize("kind,ref", [
    ("neg1", lambda n: list(range(n, 0, -1))),
    ("neg3", lambda n: list(range(n, 1, -3))),
    ("runtime_step", lambda n: list(range(1, 2 * n, n // 3))),
    ("static_neg", lambda n: list(range(9, -1, -4))),
    ("triangular", lambda n: [i * 100 + j for i in range(n) for j in range(i)]),
])
def test_negative_runtime_and_triangular_steps(kind, ref):
    n = 10
    out = torch.full((100,), -1, dtype=torch.int32, device=DEVICE)
    steps_kernel[(1,)](out, n, KIND=kind)
    want = ref(n)
    got = out.cpu().tolist()
    assert got[99] == len(want) and got[:len(want)] == want


# -- tl.static_range -------------------------------------------------------------------------------
@triton.jit
def static_range_kernel(x_ptr, out_ptr, B: tl.constexpr, K: tl.constexpr):
    offs = tl.arange(0, B)
    acc = tl.zeros((B,), tl.float32)
    for k in tl.static_range(K):  # unrolled: k is a constexpr in each copy
        if k % 2 == 0:  # a static branch per copy
            acc += tl.load(x_ptr + k * B + offs)
        else:
            acc -= tl.load(x_ptr + k * B + offs) * k
    tl.store(out_ptr + offs, acc)
    coeffs: tl.constexpr = (3, 5, 7)
    s = tl.program_id(0) * 0  # a runtime scalar
    for j in tl.static_range(len(coeffs)):
        s += coeffs[j] * (j + 1)  # indexing a constexpr tuple needs a constexpr index
    tl.store(out_ptr + B, s.to(tl.float32))


@pytest.mark.parametrize("K", [1, 4, 7])
def test_static_range(K):
    B = 32
    x = torch.randint(-9, 10, (K, B)).float()
    out = torch.empty(B + 1, device=DEVICE)
    static_range_kernel[(1,)](dev(x), out, B=B, K=K)
    ref = torch.zeros(B)
    for k in range(K):
        ref = ref + x[k] if k % 2 == 0 else ref - x[k] * k
    assert torch.equal(out.cpu()[:B], ref)
    assert out.cpu()[B].item() == 3 + 10 + 21
    assert "scf.for" not in static_range_kernel.warmup(dev(x), out, B=B, K=K, grid=(1,)).asm["ttir"]


# -- scf.while -------------------------------------------------------------------------------------
@triton.jit
def while_tuple_kernel(out_ptr, n, B: tl.constexpr):
    # a while loop carrying a tuple of (tensor, tensor, scalar): B Fibonacci sequences at once
    offs = tl.arange(0, B)
    state = (offs.to(tl.int64), offs.to(tl.int64) + 1, 0)
    while state[2] < n:
        a, b, i = state
        state = (b, a + b, i + 1)
    tl.store(out_ptr + offs, state[0])
    tl.store(out_ptr + B, state[2])


@pytest.mark.parametrize("n", [0, 1, 10, 40])
def test_while_carrying_a_tuple_of_tensors(n):
    B = 8
    out = torch.full((B + 1,), -1, dtype=torch.int64, device=DEVICE)
    while_tuple_kernel[(1,)](out, n, B=B)
    ref = []
    for s in range(B):
        a, b = s, s + 1
        for _ in range(n):
            a, b = b, a + b
        ref.append(a)
    assert out.cpu().tolist() == ref + [n]


@triton.jit
def while_data_dependent_kernel(x_ptr, out_ptr, iters_ptr, B: tl.constexpr):
    # Newton's square root per element, until every element has converged; the condition is a reduction
    offs = tl.arange(0, B)
    a = tl.load(x_ptr + offs)
    y = tl.maximum(a, 1.0)
    err = tl.full((B,), 1.0, tl.float32)
    it = 0
    while tl.max(err, axis=0) > 1e-6 and it < 100:
        y_new = 0.5 * (y + a / y)
        err = tl.abs(y_new - y) / y_new
        y = y_new
        it += 1
    tl.store(out_ptr + offs, y)
    tl.store(iters_ptr, it)


def test_while_with_a_data_dependent_condition():
    x = torch.rand(64) * 1000 + 0.5
    out = torch.empty(64, device=DEVICE)
    iters = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    while_data_dependent_kernel[(1,)](dev(x), out, iters, B=64)
    torch.testing.assert_close(out.cpu(), x.sqrt(), rtol=1e-6, atol=0)
    assert 3 < iters.item() < 100


@triton.jit
def while_per_program_kernel(n_ptr, out_ptr):
    # each program runs a different number of iterations (the trip count comes from memory)
    pid = tl.program_id(0)
    n = tl.load(n_ptr + pid)
    total = 0
    i = 0
    while i < n:
        total += i * i
        i += 1
    tl.store(out_ptr + pid, total)


def test_while_trip_counts_differ_per_program():
    n = torch.randint(0, 50, (70,), dtype=torch.int32)
    out = torch.full((70,), -1, dtype=torch.int32, device=DEVICE)
    while_per_program_kernel[(70,)](dev(n), out)
    assert out.cpu().tolist() == [sum(i * i for i in range(k)) for k in n.tolist()]


# -- scf.if yielding values, conditional expressions -----------------------------------------------
@triton.jit
def if_kernel(x_ptr, out_ptr, flag_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs)
    f = tl.load(flag_ptr + tl.program_id(0))
    if f > 0:
        y = x * 2
        z = 1
    elif f < 0:
        y = -x
        z = 2
    else:
        y = x + 100
        z = 3
    w = y if tl.sum(x, axis=0) > 0 else y * 0  # a scalar-conditioned expression on a tensor
    tl.store(out_ptr + tl.program_id(0) * (B + 1) + offs, w)
    tl.store(out_ptr + tl.program_id(0) * (B + 1) + B, z)


def test_if_elif_else_yield_tensors_and_scalars():
    B = 16
    x = torch.randint(-3, 6, (B,)).float()
    flags = torch.tensor([5, -2, 0], dtype=torch.int32)
    out = torch.empty(3 * (B + 1), device=DEVICE)
    if_kernel[(3,)](dev(x), out, dev(flags), B=B)
    o = out.cpu().view(3, B + 1)
    pos = x.sum() > 0
    for r, (y, z) in enumerate([(x * 2, 1), (-x, 2), (x + 100, 3)]):
        assert torch.equal(o[r, :B], y if pos else y * 0) and o[r, B].item() == z


# -- early returns and functions -------------------------------------------------------------------
@triton.jit(noinline=True)
def _classify(v):
    # several returns with values, nested: a tt.call of a multi-block function
    if v < 0:
        if v < -10:
            return -2
        return -1
    elif v == 0:
        return 0
    if v > 10:
        return 2
    return 1


@triton.jit
def _classify_inline(v):
    if v < 0:
        return -1
    return 1


@triton.jit
def early_return_kernel(v_ptr, out_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        return  # programs past the end leave at once
    v = tl.load(v_ptr + pid)
    if v == 99:
        tl.store(out_ptr + pid, 1000)
        return  # a second exit in the middle of the kernel
    tl.store(out_ptr + pid, _classify(v) * 10 + _classify_inline(v))


def test_early_returns_with_values_from_noinline_and_inline_functions():
    vals = [-20, -10, -3, 0, 3, 10, 11, 99, 5]
    v = torch.tensor(vals, dtype=torch.int32)
    out = torch.full((12,), -5, dtype=torch.int32, device=DEVICE)
    early_return_kernel[(12,)](dev(v), out, len(vals))

    def cls(x):
        return -2 if x < -10 else -1 if x < 0 else 0 if x == 0 else 2 if x > 10 else 1

    ref = [1000 if x == 99 else cls(x) * 10 + (-1 if x < 0 else 1) for x in vals] + [-5] * 3
    assert out.cpu().tolist() == ref
    ttir = early_return_kernel.warmup(dev(v), out, len(vals), grid=(1,)).asm["ttir"]
    assert "tt.call" in ttir


@triton.jit(noinline=True)
def _stats(x_ptr, start, n, B: tl.constexpr, SCALE: tl.constexpr):
    # a noinline function (scalar and pointer arguments only, as Triton requires) returning a tuple of a
    # tensor and a scalar
    offs = start + tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0) * SCALE
    return x, tl.sum(x, axis=0)


@triton.jit
def noinline_kernel(x_ptr, out_ptr, n, B: tl.constexpr):
    start = tl.program_id(0) * B
    offs = start + tl.arange(0, B)
    y, s = _stats(x_ptr, start, n, B, 2.0)
    z, t = _stats(x_ptr, start, n, B, 3.0)  # a second specialisation of the same function
    total = s * 0
    for k in range(2):  # called inside a loop too
        y2, s2 = _stats(x_ptr, start, n, B, 2.0)
        z2, t2 = _stats(x_ptr, start, n, B, 3.0)
        total += s2 + t2 * k
    tl.store(out_ptr + offs, y + z, mask=offs < n)
    tl.store(out_ptr + n + tl.program_id(0), total)


def test_noinline_functions_returning_tuples_called_in_a_loop():
    n, B = 100, 64
    x = torch.randint(-4, 5, (n,)).float()
    out = torch.zeros(n + 2, device=DEVICE)
    noinline_kernel[(2,)](dev(x), out, n, B=B)
    o = out.cpu()
    assert torch.equal(o[:n], x * 5)
    for p in range(2):
        blk = x[p * B:(p + 1) * B]
        assert o[n + p].item() == 2 * (blk * 2).sum().item() + (blk * 3).sum().item()
    ttir = noinline_kernel.warmup(dev(x), out, n, B=B, grid=(1,)).asm["ttir"]
    assert ttir.count("tt.call") >= 2


# -- constexpr specialisation ----------------------------------------------------------------------
@triton.jit
def constexpr_kernel(x_ptr, out_ptr, bias_ptr, SCALE: tl.constexpr, DTYPE: tl.constexpr, MODE: tl.constexpr,
                     FLAG: tl.constexpr, B: tl.constexpr = 16):
    tl.static_assert(B % 8 == 0, "B must be a multiple of 8")
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs).to(DTYPE)
    if MODE == "square":
        x = x * x
    elif MODE == "neg":
        x = -x
    if FLAG:
        x = x + 1
    if bias_ptr is not None:  # None specialises the branch away
        x = x + tl.load(bias_ptr + offs).to(DTYPE)
    HALF: tl.constexpr = SCALE / 2
    tl.store(out_ptr + offs, (x * HALF).to(tl.float32))


@pytest.mark.parametrize("scale,dtype,mode,flag,bias", [
    (2, tl.float32, "square", False, False),
    (4.0, tl.float16, "neg", True, True),
    (6, tl.int32, "none", True, False),
    (2, tl.int64, "square", False, True),
], ids=["f32-square", "f16-neg-flag-bias", "i32-flag", "i64-square-bias"])
def test_constexpr_values_dtypes_and_none(scale, dtype, mode, flag, bias):
    x = torch.arange(-8, 8).float()
    b = torch.arange(16).float() * 3
    out = torch.empty(16, device=DEVICE)
    constexpr_kernel[(1,)](dev(x), out, dev(b) if bias else None, SCALE=scale, DTYPE=dtype, MODE=mode, FLAG=flag)
    y = {"square": x * x, "neg": -x, "none": x}[mode] + (1 if flag else 0) + (b if bias else 0)
    assert torch.equal(out.cpu(), y * (scale / 2))


def test_static_assert_on_a_constexpr_fails_at_compile_time():
    x = torch.zeros(12, device=DEVICE)
    with pytest.raises(triton.CompilationError, match="multiple of 8"):
        constexpr_kernel[(1,)](x, x, None, SCALE=2, DTYPE=tl.float32, MODE="none", FLAG=False, B=12)


@triton.jit
def spec_kernel(x_ptr, out_ptr, n, stride, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n, other=-1.0), mask=offs < B)


@triton.jit(do_not_specialize=["n", "stride"])
def nospec_kernel(x_ptr, out_ptr, n, stride, B: tl.constexpr):
    offs = tl.arange(0, B)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n, other=-1.0), mask=offs < B)


@pytest.mark.parametrize("kernel", [spec_kernel, nospec_kernel], ids=["specialised", "do_not_specialize"])
def test_integer_specialisation_and_do_not_specialize(kernel):
    x = torch.arange(1000).float()
    xd = dev(x)
    before = compiled_variants(kernel)
    cases = [(1, 1), (16, 16), (17, 3), (5, 1), (32, 2)]  # 1 and multiples of 16 are specialised by default
    for n, stride in cases:
        out = torch.zeros(32, device=DEVICE)
        kernel[(1,)](xd, out, n, stride, B=32)
        ref = torch.full((32,), -1.0)
        ref[:n] = x[:n * stride:stride][:n]
        assert torch.equal(out.cpu(), ref), (n, stride)
    made = compiled_variants(kernel) - before
    if kernel is nospec_kernel:
        assert made <= 1  # one binary for every value
    else:
        assert made >= 3  # n==1 / n%16==0 / other, and the same for stride


# -- grids, num_programs, persistent loops ---------------------------------------------------------
@triton.jit
def grid_kernel(out_ptr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny, nz = tl.num_programs(0), tl.num_programs(1), tl.num_programs(2)
    lin = (z * ny + y) * nx + x
    tl.store(out_ptr + lin * 4, x)
    tl.store(out_ptr + lin * 4 + 1, y)
    tl.store(out_ptr + lin * 4 + 2, z)
    tl.store(out_ptr + lin * 4 + 3, nx * 10000 + ny * 100 + nz)


@pytest.mark.parametrize("grid", [(1,), (33,), (5000,), (1, 40), (1, 1, 70), (3, 4, 5), (65, 2, 1), (2, 3, 37)],
                         ids=lambda g: "x".join(map(str, g)))
def test_grids(grid):
    g = tuple(grid) + (1,) * (3 - len(grid))
    total = g[0] * g[1] * g[2]
    out = torch.full((total * 4,), -1, dtype=torch.int32, device=DEVICE)
    grid_kernel[grid](out)
    z, y, x = torch.meshgrid(torch.arange(g[2]), torch.arange(g[1]), torch.arange(g[0]), indexing="ij")
    ref = torch.stack([x, y, z, torch.full_like(x, g[0] * 10000 + g[1] * 100 + g[2])], -1).flatten().int()
    assert torch.equal(out.cpu(), ref)


@triton.jit
def persistent_kernel(x_ptr, out_ptr, n_tiles, B: tl.constexpr):
    # a persistent loop: each program strides over the tiles by the number of programs
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        offs = t * B + tl.arange(0, B)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2 + tl.program_id(0) * 0 + t * 0)
        tl.atomic_add(out_ptr + n_tiles * B + tl.program_id(0), 1)


@pytest.mark.parametrize("programs", [1, 7, 32, 100])
def test_persistent_loop_over_tiles(programs):
    n_tiles, B = 50, 32
    x = torch.randn(n_tiles * B)
    out = torch.zeros(n_tiles * B + programs, device=DEVICE)
    persistent_kernel[(programs,)](dev(x), out, n_tiles, B=B)
    o = out.cpu()
    assert torch.equal(o[:n_tiles * B], x * 2)
    assert o[n_tiles * B:].tolist() == [float(len(range(p, n_tiles, programs))) for p in range(programs)]


@triton.jit
def meta_grid_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@pytest.mark.parametrize("BLOCK", [16, 128])
def test_grid_callable_from_meta(BLOCK):
    n = 1000
    x = torch.randn(n)
    out = torch.zeros(n, device=DEVICE)
    meta_grid_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](dev(x), out, n, BLOCK=BLOCK)
    assert torch.equal(out.cpu(), x + 1)


# -- loop-carried values: parallel assignment semantics of scf.yield -------------------------------
@triton.jit
def carried_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, WHILE: tl.constexpr, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(x_ptr + r[:, None] * B + r[None, :])
    a = x
    b = x + 1
    c = x * 2
    s0 = tl.program_id(0) + 1
    s1 = tl.program_id(0) + 2
    i = 0
    if WHILE:  # the same body under scf.while or scf.for
        while i < n:
            i += 1
            a, b, c, s0, s1 = _carried_step(x, a, b, c, s0, s1, OP)
    else:
        for _ in range(n):
            a, b, c, s0, s1 = _carried_step(x, a, b, c, s0, s1, OP)
    tl.store(out_ptr + r[:, None] * B + r[None, :], a)
    tl.store(out_ptr + B * B + r[:, None] * B + r[None, :], b)
    tl.store(out_ptr + 2 * B * B + r[:, None] * B + r[None, :], c)
    tl.store(out_ptr + 3 * B * B, (s0 * 1000 + s1).to(tl.float32))


@triton.jit
def _carried_step(x, a, b, c, s0, s1, OP: tl.constexpr):
    if OP == "swap":
        a, b = b, a + b
    elif OP == "rotate3":
        a, b, c = b, c, a + c
    elif OP == "same_value_twice":
        a = a * 2 + 1
        b = a
    elif OP == "old_value_after_update":
        old = a
        a = a * 2 + 1
        b += old
    elif OP == "dot_acc":
        a = tl.dot(x, x, a)
    elif OP == "dot_twice":
        b = tl.dot(x, x, a)
        a = tl.dot(x, x, a)
    elif OP == "dot_swap":
        a, b = b, tl.dot(x, x, b)
    elif OP == "trans_self":
        a = tl.trans(a) * 2 + a
    elif OP == "scalar_swap":
        s0, s1 = s1, s0 + s1
    elif OP == "tile_and_scalar_swap":
        a, b = b, a + s0
        s0 = s0 + 1
    else:  # "swap_then_use"
        a, b = b, a + b
        c = c + a
    return a, b, c, s0, s1


def _carried_ref(op, x, n):
    a, b, c = x, x + 1, x * 2
    s0, s1 = 1, 2
    for _ in range(n):
        if op == "swap":
            a, b = b, a + b
        elif op == "rotate3":
            a, b, c = b, c, a + c
        elif op == "same_value_twice":
            a = a * 2 + 1
            b = a
        elif op == "old_value_after_update":
            a, b = a * 2 + 1, b + a
        elif op == "dot_acc":
            a = x @ x + a
        elif op == "dot_twice":
            a, b = x @ x + a, x @ x + a
        elif op == "dot_swap":
            a, b = b, x @ x + b
        elif op == "trans_self":
            a = a.t() * 2 + a
        elif op == "scalar_swap":
            s0, s1 = s1, s0 + s1
        elif op == "tile_and_scalar_swap":
            a, b = b, a + s0
            s0 = s0 + 1
        else:
            a, b = b, a + b
            c = c + a
    return torch.cat([a.flatten(), b.flatten(), c.flatten(), torch.tensor([float(s0 * 1000 + s1)])])


CARRIED = [pytest.param(op, loop, id=f"{loop}-{op}")
           for op in ["swap", "rotate3", "same_value_twice", "old_value_after_update", "dot_acc", "dot_twice",
                      "dot_swap", "trans_self", "scalar_swap", "tile_and_scalar_swap", "swap_then_use"]
           for loop in ["for", "while"]]


@pytest.mark.parametrize("op,loop", CARRIED)
def test_loop_carried_values_are_assigned_in_parallel(op, loop):
    B, n = 16, 3
    x = torch.randint(-2, 3, (B, B)).float()
    out = torch.empty(3 * B * B + 1, device=DEVICE)
    carried_kernel[(1,)](dev(x), out, n, OP=op, WHILE=loop == "while", B=B)
    assert torch.equal(out.cpu(), _carried_ref(op, x, n))


# -- loop bounds of other integer types ------------------------------------------------------------
@triton.jit
def wide_bounds_kernel(out_ptr, lo, hi, STEP: tl.constexpr):
    acc = lo * 0
    k = 0
    for i in range(lo, hi, STEP):
        acc += i % 1000
        k += 1
    tl.store(out_ptr, acc)
    tl.store(out_ptr + 1, k)


@pytest.mark.parametrize("lo,step", [(2 ** 40 + 3, 1), (2 ** 40 + 3, 2), (2 ** 31 + 5, 1), (-(2 ** 35), 3)],
                         ids=["i64", "i64-by2", "above-i32", "negative-i64-by3"])
def test_loop_bounds_beyond_int32(lo, step):
    hi = lo + 11
    out = torch.zeros(2, dtype=torch.int64, device=DEVICE)
    wide_bounds_kernel[(1,)](out, lo, hi, STEP=step)
    idx = range(lo, hi, step)
    assert out.cpu().tolist() == [sum(int(torch.tensor(i).fmod(1000)) for i in idx), len(idx)]
