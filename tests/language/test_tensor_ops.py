"""Tensor ops on spyre end to end, against torch on the CPU: scans (tl.cumsum/cumprod,
tl.associative_scan), join/split/cat/interleave/permute/trans/reshape/broadcast, tl.histogram,
tl.gather, tl.sort/tl.flip (built by Triton's standard library from reshapes and xor reductions),
tl.argmax/argmin ties, tl.reduce with two-operand combines, tl.map_elementwise, and the integer and
power ops (arith.floordivsi, math.ipowi, ...) that only hand-written TTIR produces.

Lowering: spyre_triton/compiler/ops_tensor.py.
"""
import os
import tempfile

import pytest
import torch
import triton
import triton.language as tl

from spyre_triton.compiler.errors import CompilationError
from spyre_triton.reference_kernels import collatz_steps, collatz_steps_ref

from asm_helpers import insns, mnemonics
from conftest import DEVICE
GRID = (1,)


def dev(t):
    return t.to(DEVICE)


def asm_of(kernel, *args, **kw):
    return kernel.warmup(*args, grid=GRID, **kw).asm["spyreasm"]


# == scans ======================================================================================
@triton.jit
def k_scan2d(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr,
             PROD: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if PROD:
        y = tl.cumprod(x, AXIS, reverse=REV)
    else:
        y = tl.cumsum(x, AXIS, reverse=REV)
    tl.store(o_ptr + offs, y)


def _torch_scan(x, axis, rev, prod):
    xr = x.flip(axis) if rev else x
    y = xr.cumprod(axis) if prod else xr.cumsum(axis)
    y = y.to(x.dtype)
    return y.flip(axis) if rev else y


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("prod", [False, True], ids=["cumsum", "cumprod"])
@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("axis", [0, 1])
def test_cumsum_cumprod_2d(axis, rev, prod, dtype):
    torch.manual_seed(0)
    M, N = 8, 16
    if dtype.is_floating_point:
        x = torch.rand(M, N) * 0.5 + 0.75
    else:
        x = torch.randint(-3, 4, (M, N), dtype=dtype)
    o = torch.empty(M, N, dtype=dtype, device=DEVICE)
    k_scan2d[GRID](dev(x), o, M, N, axis, rev, prod)
    ref = _torch_scan(x, axis, rev, prod)
    if dtype.is_floating_point:
        torch.testing.assert_close(o.cpu(), ref, rtol=1e-5, atol=1e-5)
    else:
        assert torch.equal(o.cpu(), ref)


@triton.jit
def k_scan3d(x_ptr, o_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr,
             REV: tl.constexpr):
    offs = (tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C
            + tl.arange(0, C)[None, None, :])
    x = tl.load(x_ptr + offs)
    tl.store(o_ptr + offs, tl.cumsum(x, AXIS, reverse=REV))


@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_cumsum_3d(axis, rev):
    x = torch.randint(-100, 100, (4, 8, 2), dtype=torch.int32)
    o = torch.empty_like(x, device=DEVICE)
    k_scan3d[GRID](dev(x), o, 4, 8, 2, axis, rev)
    assert torch.equal(o.cpu(), _torch_scan(x, axis, rev, False))


@triton.jit
def k_cumsum_1d(x_ptr, o_ptr, N: tl.constexpr, REV: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0, reverse=REV))


@pytest.mark.parametrize("n", [1, 2, 1024])
@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
def test_cumsum_1d_sizes(n, rev):
    x = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    o = torch.empty_like(x, device=DEVICE)
    k_cumsum_1d[GRID](dev(x), o, n, rev)
    assert torch.equal(o.cpu(), _torch_scan(x, 0, rev, False))


@triton.jit
def k_long_cumsum(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    # a cumsum longer than one tile: scan block by block inside a loop, carrying the running total
    carry = tl.zeros([1], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        y = tl.cumsum(x, 0) + carry
        tl.store(o_ptr + offs, y, mask=offs < n)
        carry += tl.sum(x, 0)


def test_cumsum_block_by_block_in_a_loop():
    n = 1000
    x = torch.randint(-5, 6, (n,)).float()
    o = torch.empty(n, device=DEVICE)
    k_long_cumsum[GRID](dev(x), o, n, 128)
    torch.testing.assert_close(o.cpu(), x.cumsum(0), rtol=0, atol=0)


@triton.jit
def _affine_combine(a1, b1, a2, b2):
    # composition of x -> a*x + b maps, applied left then right: NOT commutative
    return a1 * a2, b1 * a2 + b2


@triton.jit
def k_assoc_scan(a_ptr, b_ptr, oa_ptr, ob_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                 REV: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    ra, rb = tl.associative_scan((a, b), AXIS, _affine_combine, reverse=REV)
    tl.store(oa_ptr + offs, ra)
    tl.store(ob_ptr + offs, rb)


def _ref_affine_scan(a, b, axis, rev):
    """Triton's scan semantics: combine(accumulator, next) in scan order; reverse = flip/scan/flip."""
    a, b = a.double(), b.double()
    if rev:
        a, b = a.flip(axis), b.flip(axis)
    a, b = a.movedim(axis, 0).clone(), b.movedim(axis, 0).clone()
    for i in range(1, a.shape[0]):
        a[i], b[i] = a[i - 1] * a[i], b[i - 1] * a[i] + b[i]
    a, b = a.movedim(0, axis), b.movedim(0, axis)
    if rev:
        a, b = a.flip(axis), b.flip(axis)
    return a.float(), b.float()


@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
@pytest.mark.parametrize("axis", [0, 1])
def test_associative_scan_two_operands_noncommutative(axis, rev):
    torch.manual_seed(1)
    M, N = 8, 16
    a = torch.rand(M, N) * 0.5 + 0.6
    b = torch.randn(M, N)
    oa = torch.empty(M, N, device=DEVICE)
    ob = torch.empty(M, N, device=DEVICE)
    k_assoc_scan[GRID](dev(a), dev(b), oa, ob, M, N, axis, rev)
    ra, rb = _ref_affine_scan(a, b, axis, rev)
    torch.testing.assert_close(oa.cpu(), ra, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ob.cpu(), rb, rtol=1e-4, atol=1e-4)


@triton.jit
def _keep_first(a, b):
    return a


@triton.jit
def k_scan_first(x_ptr, o_ptr, N: tl.constexpr, REV: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.associative_scan(tl.load(x_ptr + offs), 0, _keep_first, reverse=REV))


@pytest.mark.parametrize("rev", [False, True], ids=["fwd", "rev"])
def test_scan_combine_returning_an_argument(rev):
    # the combine returns its (aliased) argument: the in-place scan step must stage it
    x = torch.arange(1, 65, dtype=torch.int32)
    o = torch.empty_like(x, device=DEVICE)
    k_scan_first[GRID](dev(x), o, 64, rev)
    assert torch.equal(o.cpu(), torch.full_like(x, 64 if rev else 1))


def test_scan_is_log_steps_of_whole_tiles():
    x = torch.empty(8, 16, device=DEVICE)
    asm = asm_of(k_scan2d, x, x, M=8, N=16, AXIS=1, REV=True, PROD=False)
    assert mnemonics(asm).count("add.f32") == 4  # log2(16) combine applications, each on a whole row block


# == join / split / cat / interleave / permute / trans / reshape / broadcast ======================
@triton.jit
def k_join_split(x_ptr, y_ptr, j_ptr, s_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    j = tl.join(x, y)  # [N, 2]
    tl.store(j_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    a, b = tl.split(j * 10)
    tl.store(s_ptr + offs, a)
    tl.store(s_ptr + N + offs, b)


def test_join_split():
    N = 16
    x, y = torch.randn(N), torch.randn(N)
    j = torch.empty(N, 2, device=DEVICE)
    s = torch.empty(2 * N, device=DEVICE)
    k_join_split[GRID](dev(x), dev(y), j, s, N)
    torch.testing.assert_close(j.cpu(), torch.stack([x, y], 1), rtol=0, atol=0)
    torch.testing.assert_close(s.cpu(), torch.cat([x * 10, y * 10]), rtol=0, atol=0)


@triton.jit
def k_join_ptrs(x_ptr, o_ptr, N: tl.constexpr):
    # pointers and integer ranges joined stay affine: one strided load, no gather
    offs = tl.arange(0, N)
    p = tl.join(x_ptr + offs, x_ptr + N + offs)
    v = tl.load(p)  # [N, 2]
    tl.store(o_ptr + tl.join(offs, offs + N), v)


def test_join_of_pointers_stays_a_dma_descriptor():
    N = 32
    x = torch.randn(2 * N)
    o = torch.empty(2 * N, device=DEVICE)
    k_join_ptrs[GRID](dev(x), o, N)
    torch.testing.assert_close(o.cpu(), x, rtol=0, atol=0)
    asm = asm_of(k_join_ptrs, o, o, N=N)
    assert not insns(asm, "gather", "scatter")


@triton.jit
def k_cat_interleave(x_ptr, y_ptr, c_ptr, i_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    o2 = tl.arange(0, 2 * N)
    tl.store(c_ptr + o2, tl.cat(x, y, can_reorder=True))
    tl.store(i_ptr + o2, tl.interleave(x, y))


def test_cat_interleave():
    N = 16
    x, y = torch.randn(N), torch.randn(N)
    c = torch.empty(2 * N, device=DEVICE)
    i = torch.empty(2 * N, device=DEVICE)
    k_cat_interleave[GRID](dev(x), dev(y), c, i, N)
    # tl.cat with can_reorder may order elements freely; Spyre keeps them in order
    torch.testing.assert_close(c.cpu(), torch.cat([x, y]), rtol=0, atol=0)
    torch.testing.assert_close(i.cpu(), torch.stack([x, y], 1).reshape(-1), rtol=0, atol=0)


@triton.jit
def k_permute3(x_ptr, o_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, P0: tl.constexpr,
               P1: tl.constexpr, P2: tl.constexpr, LOADED: tl.constexpr):
    offs = (tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C
            + tl.arange(0, C)[None, None, :])
    if LOADED:
        x = tl.load(x_ptr + offs)
    else:
        x = offs  # an affine value: permuted without touching memory
    y = tl.permute(x, (P0, P1, P2))
    n = tl.reshape(y, (A * B * C,))
    tl.store(o_ptr + tl.arange(0, A * B * C), n.to(tl.float32))


@pytest.mark.parametrize("loaded", [True, False], ids=["tile", "affine"])
@pytest.mark.parametrize("perm", [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])
def test_permute_3d(perm, loaded):
    A, B, C = 2, 4, 8
    x = torch.arange(A * B * C, dtype=torch.float32).reshape(A, B, C)
    o = torch.empty(A * B * C, device=DEVICE)
    k_permute3[GRID](dev(x), o, A, B, C, *perm, loaded)
    assert torch.equal(o.cpu(), x.permute(perm).reshape(-1))


@triton.jit
def k_trans_reshape(x_ptr, t_ptr, r_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    t = tl.trans(x)  # [N, M]
    tl.store(t_ptr + tl.arange(0, N)[:, None] * M + tl.arange(0, M)[None, :], t)
    r = tl.reshape(x, (M * N // 4, 4), can_reorder=True)
    tl.store(r_ptr + tl.arange(0, M * N // 4)[:, None] * 4 + tl.arange(0, 4)[None, :], r)


def test_trans_and_reshape_allow_reorder():
    M, N = 8, 16
    x = torch.randn(M, N)
    t = torch.empty(N, M, device=DEVICE)
    r = torch.empty(M * N // 4, 4, device=DEVICE)
    k_trans_reshape[GRID](dev(x), t, r, M, N)
    torch.testing.assert_close(t.cpu(), x.t(), rtol=0, atol=0)
    # can_reorder lets the compiler permute elements; Spyre keeps row-major order
    torch.testing.assert_close(r.cpu(), x.reshape(-1, 4), rtol=0, atol=0)


@triton.jit
def k_reshape_affine(o_ptr, A: tl.constexpr, B: tl.constexpr):
    r = tl.arange(0, A * B)
    m = tl.reshape(r, (A, B))  # split: stays affine
    f = tl.reshape(tl.trans(m), (A * B,))  # merge of a transposed range: not affine, materialised
    tl.store(o_ptr + tl.arange(0, A)[:, None] * B + tl.arange(0, B)[None, :], m)
    tl.store(o_ptr + A * B + r, f)


def test_reshape_of_ranges():
    A, B = 4, 8
    o = torch.empty(2 * A * B, dtype=torch.int32, device=DEVICE)
    k_reshape_affine[GRID](o, A, B)
    r = torch.arange(A * B, dtype=torch.int32)
    assert torch.equal(o.cpu(), torch.cat([r, r.reshape(A, B).t().reshape(-1)]))


@triton.jit
def k_broadcast3(x_ptr, o_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    # x: [A, 1, C] loaded, broadcast against [1, B, 1]
    xa = tl.load(x_ptr + tl.arange(0, A)[:, None, None] * C + tl.arange(0, C)[None, None, :])
    yb = tl.arange(0, B)[None, :, None].to(tl.float32)
    z = xa + yb
    offs = (tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C
            + tl.arange(0, C)[None, None, :])
    tl.store(o_ptr + offs, z)


def test_broadcast_3d():
    A, B, C = 2, 4, 8
    x = torch.randn(A, 1, C)
    o = torch.empty(A, B, C, device=DEVICE)
    k_broadcast3[GRID](dev(x), o, A, B, C)
    torch.testing.assert_close(o.cpu(), x + torch.arange(B, dtype=torch.float32)[None, :, None], rtol=0, atol=0)


# == histogram and gather ========================================================================
@triton.jit
def k_hist(x_ptr, o_ptr, n, N: tl.constexpr, B: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if MASKED:
        h = tl.histogram(x, B, mask=offs < n)
    else:
        h = tl.histogram(x, B)
    tl.store(o_ptr + tl.arange(0, B), h)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8])
@pytest.mark.parametrize("masked", [False, True], ids=["all", "masked"])
@pytest.mark.parametrize("N,B", [(64, 8), (1024, 64)])
def test_histogram(N, B, masked, dtype):
    torch.manual_seed(0)
    x = torch.randint(0, B, (N,), dtype=dtype)
    n = N // 3 if masked else N
    o = torch.empty(B, dtype=torch.int32, device=DEVICE)
    k_hist[GRID](dev(x), o, n, N, B, masked)
    ref = torch.bincount(x[:n].long(), minlength=B).to(torch.int32)
    assert torch.equal(o.cpu(), ref)


@triton.jit
def k_gather(x_ptr, i_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, IM: tl.constexpr, IN: tl.constexpr,
             AXIS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    ioffs = tl.arange(0, IM)[:, None] * IN + tl.arange(0, IN)[None, :]
    i = tl.load(i_ptr + ioffs)
    tl.store(o_ptr + ioffs, tl.gather(x, i, AXIS))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather(axis, dtype):
    torch.manual_seed(0)
    M, N = 16, 32
    x = (torch.randn(M, N) * 50).to(dtype)
    IM, IN = (8, N) if axis == 0 else (M, 64)
    i = torch.randint(0, (M, N)[axis], (IM, IN), dtype=torch.int32)
    o = torch.empty(IM, IN, dtype=dtype, device=DEVICE)
    k_gather[GRID](dev(x), dev(i), o, M, N, IM, IN, axis)
    assert torch.equal(o.cpu(), torch.gather(x, axis, i.long()))


@pytest.mark.parametrize("idx_dtype", [torch.int64, torch.int16])
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_big_in_chunks(axis, idx_dtype):
    # 64x128 indices into 128x128 along 128: the one-hot intermediates are built a few rows at a time
    torch.manual_seed(0)
    M, N = 128, 128
    dtype = torch.float32
    x = torch.randn(M, N)
    IM, IN = (64, N) if axis == 0 else (M, 64)
    i = torch.randint(0, (M, N)[axis], (IM, IN), dtype=idx_dtype)
    o = torch.empty(IM, IN, dtype=dtype, device=DEVICE)
    k_gather[GRID](dev(x), dev(i), o, M, N, IM, IN, axis)
    assert torch.equal(o.cpu(), torch.gather(x, axis, i.long()))


def test_gather_keeps_negative_zero_and_nan_bits():
    M, N = 4, 8
    x = torch.tensor([-0.0, float("nan"), float("inf"), 1.5] * 8).reshape(M, N)
    i = torch.randint(0, N, (M, N), dtype=torch.int32)
    o = torch.empty(M, N, device=DEVICE)
    k_gather[GRID](dev(x), dev(i), o, M, N, M, N, 1)
    ref = torch.gather(x, 1, i.long())
    assert torch.equal(o.cpu().view(torch.int32), ref.view(torch.int32))


def test_gather_too_large_is_a_clear_error():
    x = torch.empty(1024, 1024, device=DEVICE)
    i = torch.empty(1024, 1024, dtype=torch.int32, device=DEVICE)
    with pytest.raises(CompilationError, match="no instruction that gathers from LX"):
        asm_of(k_gather, x, i, x, M=1024, N=1024, IM=1024, IN=1024, AXIS=1)


# == sort / flip / argmax / reduce with custom combines ===========================================
@triton.jit
def k_sort_flip(x_ptr, s_ptr, f_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr, FDIM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(s_ptr + offs, tl.sort(x, descending=DESC))
    tl.store(f_ptr + offs, tl.flip(x, FDIM))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("desc", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("fdim", [0, 1])
def test_sort_and_flip(desc, fdim, dtype):
    torch.manual_seed(0)
    M, N = 4, 32
    x = torch.randn(M, N).to(dtype) if dtype.is_floating_point else torch.randint(-50, 50, (M, N), dtype=dtype)
    s = torch.empty_like(x, device=DEVICE)
    f = torch.empty_like(x, device=DEVICE)
    k_sort_flip[GRID](dev(x), s, f, M, N, desc, fdim)
    assert torch.equal(s.cpu(), torch.sort(x, dim=1, descending=desc).values)
    assert torch.equal(f.cpu(), x.flip(fdim))


@triton.jit
def k_topk(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(o_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))


@pytest.mark.parametrize("M,N,K", [(2, 256, 8), (8, 64, 64)])
def test_topk(M, N, K):
    torch.manual_seed(0)
    x = torch.randn(M, N)
    o = torch.empty(M, K, device=DEVICE)
    k_topk[GRID](dev(x), o, M, N, K)
    assert torch.equal(o.cpu(), torch.topk(x, K, dim=1).values)


@triton.jit
def k_argminmax(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    L: tl.constexpr = N if AXIS == 0 else M
    r = tl.arange(0, L)
    tl.store(o_ptr + r, tl.argmax(x, AXIS, tie_break_left=True))
    tl.store(o_ptr + L + r, tl.argmin(x, AXIS, tie_break_left=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("axis", [0, 1])
def test_argmax_argmin_ties_pick_the_lowest_index(axis, dtype):
    torch.manual_seed(0)
    M, N = 16, 32
    x = torch.randint(0, 3, (M, N)).to(dtype)  # many ties
    L = N if axis == 0 else M
    o = torch.empty(2 * L, dtype=torch.int32, device=DEVICE)
    k_argminmax[GRID](dev(x), o, M, N, axis)
    # torch returns the first occurrence of the extreme value
    ref = torch.cat([x.argmax(axis), x.argmin(axis)]).to(torch.int32)
    assert torch.equal(o.cpu(), ref)


@triton.jit
def _sum_and_absmax(s1, m1, s2, m2):
    return s1 + s2, tl.maximum(tl.abs(m1), tl.abs(m2))


@triton.jit
def k_reduce2(x_ptr, s_ptr, m_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    s, m = tl.reduce((x, x * 2), AXIS, _sum_and_absmax)
    L: tl.constexpr = N if AXIS == 0 else M
    tl.store(s_ptr + tl.arange(0, L), s)
    tl.store(m_ptr + tl.arange(0, L), m)


@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_two_operand_combine_2d(axis):
    torch.manual_seed(0)
    M, N = 8, 32
    x = torch.randint(-20, 20, (M, N), dtype=torch.int32)
    L = N if axis == 0 else M
    s = torch.empty(L, dtype=torch.int32, device=DEVICE)
    m = torch.empty(L, dtype=torch.int32, device=DEVICE)
    k_reduce2[GRID](dev(x), s, m, M, N, axis)
    assert torch.equal(s.cpu(), x.sum(axis).to(torch.int32))
    assert torch.equal(m.cpu(), (2 * x).abs().amax(axis))


@triton.jit
def _first_max_with_index(v1, i1, v2, i2):
    take1 = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def k_reduce3(x_ptr, v_ptr, i_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr):
    ra = tl.arange(0, A)[:, None, None]
    rb = tl.arange(0, B)[None, :, None]
    rc = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + ra * (B * C) + rb * C + rc)
    if AXIS == 0:
        pos = ra + rb * 0 + rc * 0
    elif AXIS == 1:
        pos = rb + ra * 0 + rc * 0
    else:
        pos = rc + ra * 0 + rb * 0
    v, i = tl.reduce((x, pos), AXIS, _first_max_with_index)
    if AXIS == 0:
        o = tl.arange(0, B)[:, None] * C + tl.arange(0, C)[None, :]
    elif AXIS == 1:
        o = tl.arange(0, A)[:, None] * C + tl.arange(0, C)[None, :]
    else:
        o = tl.arange(0, A)[:, None] * B + tl.arange(0, B)[None, :]
    tl.store(v_ptr + o, v)
    tl.store(i_ptr + o, i)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reduce_two_operand_combine_3d(axis):
    torch.manual_seed(0)
    A, B, C = 4, 8, 16
    x = torch.randint(0, 4, (A, B, C)).float()
    shape = [A, B, C]
    del shape[axis]
    v = torch.empty(*shape, device=DEVICE)
    i = torch.empty(*shape, dtype=torch.int32, device=DEVICE)
    k_reduce3[GRID](dev(x), v, i, A, B, C, axis)
    ref = x.max(axis)
    torch.testing.assert_close(v.cpu(), ref.values, rtol=0, atol=0)
    assert torch.equal(i.cpu(), x.argmax(axis).to(torch.int32))  # first occurrence


# == map_elementwise and inline asm ================================================================
@triton.jit
def _selu_scalar(x, alpha):
    if x > 0:
        return x
    else:
        return alpha * (tl.exp(x) - 1)


@triton.jit
def _swap_scale(a0, a1, b0, b1):
    return b1, b0, a0 * 2, a1 * 3


@triton.jit
def _newton_sqrt(x):
    y = x * 0.5 + 0.5
    for _ in range(8):
        y = 0.5 * (y + x / y)
    return y


@triton.jit
def _classify(x, y):
    if x > 1.0:
        if y > 0.0:
            return x + y
        return x - y
    elif x < -1.0:
        return x * y
    if y > 2.0:
        return -y
    return tl.exp(x)


@triton.jit
def k_map(x_ptr, y_ptr, o_ptr, N: tl.constexpr, WHICH: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if WHICH == 0:
        tl.store(o_ptr + offs, tl.map_elementwise(_selu_scalar, x, tl.full([N], 1.5, tl.float32)))
    elif WHICH == 1:
        y = tl.load(y_ptr + offs)
        p, q = tl.map_elementwise(_swap_scale, x, y, pack=2)
        tl.store(o_ptr + offs, p)
        tl.store(o_ptr + N + offs, q)
    elif WHICH == 2:
        tl.store(o_ptr + offs, tl.map_elementwise(collatz_steps, x.to(tl.int32)).to(tl.float32))
    elif WHICH == 3:
        tl.store(o_ptr + offs, tl.map_elementwise(_newton_sqrt, x))
    else:
        y = tl.load(y_ptr + offs)
        tl.store(o_ptr + offs, tl.map_elementwise(_classify, x, y))


def test_map_elementwise_with_branches_runs_on_whole_tiles():
    N = 64
    x = torch.randn(N)
    o = torch.empty(N, device=DEVICE)
    k_map[GRID](dev(x), dev(x), o, N, 0)
    torch.testing.assert_close(o.cpu(), torch.where(x > 0, x, 1.5 * (torch.exp(x) - 1)))
    asm = asm_of(k_map, o, o, o, N=N, WHICH=0)
    assert not insns(asm, "brz")  # predicated: both sides on whole tiles, merged by select


def test_map_elementwise_pack2():
    N = 32
    x, y = torch.randn(N), torch.randn(N)
    o = torch.empty(2 * N, device=DEVICE)
    k_map[GRID](dev(x), dev(y), o, N, 1)
    x2, y2 = x.reshape(-1, 2), y.reshape(-1, 2)
    p = torch.stack([y2[:, 1], y2[:, 0]], 1).reshape(-1)
    q = torch.stack([x2[:, 0] * 2, x2[:, 1] * 3], 1).reshape(-1)
    torch.testing.assert_close(o.cpu(), torch.cat([p, q]), rtol=0, atol=0)


def test_map_elementwise_with_a_fixed_loop_runs_on_whole_tiles():
    N = 64
    x = torch.rand(N) * 10 + 0.1
    o = torch.empty(N, device=DEVICE)
    k_map[GRID](dev(x), dev(x), o, N, 3)
    torch.testing.assert_close(o.cpu(), x.sqrt())
    asm = asm_of(k_map, o, o, o, N=N, WHICH=3)
    # one lane-parallel loop, not one per element: one backward jump, and the tests of its peeled first
    # iteration and of its head
    assert len(insns(asm, "jmp")) == 1 and len(insns(asm, "brz")) == 2, asm


def test_map_elementwise_with_nested_early_returns():
    torch.manual_seed(0)
    N = 256
    x, y = torch.randn(N) * 2, torch.randn(N) * 2
    o = torch.empty(N, device=DEVICE)
    k_map[GRID](dev(x), dev(y), o, N, 4)
    ref = torch.where(x > 1, torch.where(y > 0, x + y, x - y),
                      torch.where(x < -1, x * y, torch.where(y > 2, -y, torch.exp(x))))
    torch.testing.assert_close(o.cpu(), ref)
    assert not insns(asm_of(k_map, o, o, o, N=N, WHICH=4), "brz")


def test_map_elementwise_with_a_data_dependent_loop_runs_per_element():
    N = 16
    x = torch.arange(1, N + 1, dtype=torch.float32)
    o = torch.empty(N, device=DEVICE)
    k_map[GRID](dev(x), dev(x), o, N, 2)
    assert o.cpu().tolist() == [float(collatz_steps_ref(v)) for v in range(1, N + 1)]


@triton.jit
def k_asm(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(o_ptr + offs, y)


def test_inline_asm_is_a_clear_error():
    x = torch.empty(8, device=DEVICE)
    with pytest.raises(CompilationError, match="inline assembly is GPU-specific and is not supported on Spyre"):
        asm_of(k_asm, x, x, N=8)


# == integer and power ops from hand-written TTIR ===================================================
_INT_TTIR = """
module {
  tt.func public @intops(%a_ptr: !tt.ptr<i32>, %b_ptr: !tt.ptr<i32>, %o_ptr: !tt.ptr<i32>, %f_ptr: !tt.ptr<f32>) {
    %r = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
    %ap = tt.splat %a_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %ap2 = tt.addptr %ap, %r : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    %a = tt.load %ap2 : tensor<16x!tt.ptr<i32>>
    %bp = tt.splat %b_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %bp2 = tt.addptr %bp, %r : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    %b = tt.load %bp2 : tensor<16x!tt.ptr<i32>>
    %floor = arith.floordivsi %a, %b : tensor<16xi32>
    %ceil = arith.ceildivsi %a, %b : tensor<16xi32>
    %ceilu = arith.ceildivui %a, %b : tensor<16xi32>
    %lo, %hi = arith.mulsi_extended %a, %b : tensor<16xi32>
    %ulo, %uhi = arith.mului_extended %a, %b : tensor<16xi32>
    %pw = math.ipowi %b, %a : tensor<16xi32>
    %c16 = arith.constant dense<16> : tensor<16xi32>
    %op = tt.splat %o_ptr : !tt.ptr<i32> -> tensor<16x!tt.ptr<i32>>
    %o0 = tt.addptr %op, %r : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o0, %floor : tensor<16x!tt.ptr<i32>>
    %o1 = tt.addptr %o0, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o1, %ceil : tensor<16x!tt.ptr<i32>>
    %o2 = tt.addptr %o1, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o2, %ceilu : tensor<16x!tt.ptr<i32>>
    %o3 = tt.addptr %o2, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o3, %lo : tensor<16x!tt.ptr<i32>>
    %o4 = tt.addptr %o3, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o4, %hi : tensor<16x!tt.ptr<i32>>
    %o5 = tt.addptr %o4, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o5, %uhi : tensor<16x!tt.ptr<i32>>
    %o6 = tt.addptr %o5, %c16 : tensor<16x!tt.ptr<i32>>, tensor<16xi32>
    tt.store %o6, %pw : tensor<16x!tt.ptr<i32>>
    %af = arith.sitofp %b : tensor<16xi32> to tensor<16xf32>
    %fp = math.fpowi %af, %a : tensor<16xf32>, tensor<16xi32>
    %fpp = tt.splat %f_ptr : !tt.ptr<f32> -> tensor<16x!tt.ptr<f32>>
    %fpp2 = tt.addptr %fpp, %r : tensor<16x!tt.ptr<f32>>, tensor<16xi32>
    tt.store %fpp2, %fp : tensor<16x!tt.ptr<f32>>
    tt.return
  }
}
"""


def _wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _ipow(a, b):
    if b < 0:
        return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
    return _wrap32(a ** b)


def test_integer_division_extended_multiply_and_powers():
    a = [7, -7, 7, -7, 6, -6, 0, 5, 3, 2, 0, -1, 31, -3, 100000, -2147483647]
    b = [2, 2, -2, -2, 3, 3, 4, -1, -2, 3, 5, 1, 2, -1, 70000, 7]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "intops.ttir")
        with open(path, "w") as f:
            f.write(_INT_TTIR)
        k = triton.compile(path)
    at, bt = torch.tensor(a, dtype=torch.int32), torch.tensor(b, dtype=torch.int32)
    o = torch.zeros(7 * 16, dtype=torch.int32, device=DEVICE)
    fo = torch.zeros(16, device=DEVICE)
    k[(1, 1, 1)](dev(at), dev(bt), o, fo)
    got = o.cpu().reshape(7, 16).tolist()
    U = 1 << 32
    assert got[0] == [x // y for x, y in zip(a, b)]
    assert got[1] == [-((-x) // y) for x, y in zip(a, b)]
    assert got[2] == [_wrap32(-(-(x % U) // (y % U))) for x, y in zip(a, b)]
    assert got[3] == [_wrap32(x * y) for x, y in zip(a, b)]
    assert got[4] == [_wrap32((x * y) >> 32) for x, y in zip(a, b)]
    assert got[5] == [_wrap32(((x % U) * (y % U)) >> 32) for x, y in zip(a, b)]
    assert got[6] == [_ipow(y, x) for x, y in zip(a, b)]
    exp = torch.pow(bt.double(), at.double()).float()
    torch.testing.assert_close(fo.cpu(), exp, rtol=1e-5, atol=0, equal_nan=True)
