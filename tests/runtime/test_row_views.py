"""Operands read in place as strided rows (ISA v5): an ld whose tile only dots, and reductions of its
rows, read gets a view register with the `rows` flag, and when its box is rows of contiguous elements,
whole and inside one allocation, the dot packs its operand (the red reduces its source) straight from
device memory at the row stride the ld found, instead of from a copy in LX.

These tests check that matmuls and 2-D reductions compile that way, that the result is the same bits as
through LX copies (elide_copies=False) for every input dtype, for edge tiles and K tails (clipped boxes,
copied as before), wrapped `% M` rows, transposed, overlapping and reversed operands (which cannot be read
in place), that faults still name the line, and that the loader and the per-program reset of row strides
keep a hand-written program honest."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import spyre_triton
from spyre_triton import _runtime, isa

from asm_helpers import DevBuf, insns, parse_asm, through_views
from conftest import DEVICE


def row_loads(kernel) -> int:
    """Loads into a view register with the `rows` flag: operands read in place as strided rows."""
    return sum(i.args.get("n", isa.NONE) != isa.NONE and i.flags.get("rows") == 1 for i in insns(kernel, "ld"))


def with_rows_flag(kernel) -> int:
    return sum(i.flags.get("rows") == 1 for i in insns(kernel))


def reading_views(kernel, op: str, *fields: str) -> int:
    """Instructions `op` whose operand fields `fields` all go through view registers."""
    return sum(set(fields) <= set(through_views(i)) for i in insns(kernel, op))


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, WRAP: tl.constexpr, ACC: tl.constexpr = tl.float32):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    if WRAP:  # tutorial 03's rows and columns: in bounds by wrapping, not by a mask
        rm = rm % M
        rn = rn % N
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        if WRAP:
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0)
        else:
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0)
            b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, b, acc, out_dtype=ACC)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    cm = tl.program_id(0) * BM + tl.arange(0, BM)
    cn = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=(cm[:, None] < M) & (cn[None, :] < N))


ACC = {torch.float32: tl.float32, torch.float64: tl.float64, torch.int32: tl.int32}


def run_mm(a, b, BM=32, BN=32, BK=16, wrap=False, **kw):
    M, K = a.shape
    N = b.shape[1]
    out_dtype = torch.int32 if a.dtype == torch.int8 else torch.float64 if a.dtype == torch.float64 else torch.float32
    c = torch.empty(M, N, dtype=out_dtype, device=DEVICE)
    da, db = a.to(DEVICE), b.to(DEVICE)
    if a.stride() != da.stride():  # keep the operand's layout on the device (a transposed view stays one)
        da = a.t().contiguous().to(DEVICE).t() if a.stride(0) == 1 else da
    h = mm_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](da, db, c, M, N, K, da.stride(0), da.stride(1),
                                                            db.stride(0), db.stride(1), BM=BM, BN=BN, BK=BK,
                                                            WRAP=wrap, ACC=ACC[out_dtype], **kw)
    return c.cpu(), h


def operands(M, N, K, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int8:
        return (torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8),
                torch.randint(-128, 128, (K, N), generator=g, dtype=torch.int8))
    return torch.randn(M, K, generator=g).to(dtype), torch.randn(K, N, generator=g).to(dtype)


def same_bits(x, y):
    return torch.equal(x.view(torch.int64 if x.dtype == torch.float64 else torch.int32),
                       y.view(torch.int64 if y.dtype == torch.float64 else torch.int32))


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,wrap", [((64, 64, 64), False), ((100, 72, 50), False), ((96, 80, 40), True),
                                        ((1, 16, 16), False)])
def test_in_place_operands_give_the_bits_of_copies(dtype, shape, wrap):
    M, N, K = shape
    a, b = operands(M, N, K, dtype)
    got, h = run_mm(a, b, wrap=wrap)
    copied, h0 = run_mm(a, b, wrap=wrap, elide_copies=False)
    assert same_bits(got, copied)
    ref = a.double() @ b.double()
    if dtype == torch.int8:
        assert torch.equal(got, ref.to(torch.int32))
    else:
        torch.testing.assert_close(got.double(), ref, atol=0.05 * K ** 0.5 if dtype in (torch.float16, torch.bfloat16)
                                   else 1e-4, rtol=0.02)
    # both operand loads carry the rows flag and the dot reads them through view registers
    assert row_loads(h) == 2 and reading_views(h, "dot", "b", "c") == 1
    assert with_rows_flag(h0) == 0


@pytest.mark.parametrize("layout", ["a_transposed", "b_transposed", "a_overlapping_rows", "a_reversed_rows"])
def test_operands_that_cannot_be_read_in_place(layout):
    M, N, K = 64, 48, 32
    a, b = operands(M, N, K, torch.float32, seed=1)
    if layout == "a_transposed":      # K strided, M contiguous: rows are not contiguous
        a = a.t().contiguous().t()
    elif layout == "b_transposed":    # a weight used as x @ w.T
        b = b.t().contiguous().t()
    if layout in ("a_transposed", "b_transposed"):
        got, _ = run_mm(a, b)
        copied, _ = run_mm(a, b, elide_copies=False)
        assert same_bits(got, copied)
        torch.testing.assert_close(got, a @ b, atol=1e-4, rtol=1e-4)
        return
    base = torch.randn(M + K + 8, generator=torch.Generator().manual_seed(2))
    da = base.to(DEVICE)
    c = torch.empty(M, N, device=DEVICE)
    if layout == "a_overlapping_rows":  # a[m, k] = base[m + k]: row stride one element, rows overlap
        want = torch.stack([base[m:m + K] for m in range(M)]) @ b
        mm_kernel[(2, 2)](da, b.to(DEVICE), c, M, N, K, 1, 1, N, 1, BM=32, BN=32, BK=16, WRAP=False)
    else:                               # a[m, k] = base[(M - 1 - m) + k]: a negative row stride
        want = torch.stack([base[M - 1 - m:M - 1 - m + K] for m in range(M)]) @ b
        mm_kernel[(2, 2)](da[M - 1:], b.to(DEVICE), c, M, N, K, -1, 1, N, 1, BM=32, BN=32, BK=16, WRAP=False)
    torch.testing.assert_close(c.cpu(), want, atol=1e-4, rtol=1e-4)


def test_a_long_k_loop_in_place():
    # many K steps, each dot reading the next 32 columns of A's rows and the next 32 rows of B in place
    a, b = operands(48, 64, 1024, torch.float32, seed=3)
    got, _ = run_mm(a, b, BM=16, BN=64, BK=32)
    copied, _ = run_mm(a, b, BM=16, BN=64, BK=32, elide_copies=False)
    assert same_bits(got, copied)
    torch.testing.assert_close(got, a @ b, atol=1e-3, rtol=1e-4)


def test_profiled_in_place_matmul_counts_the_same_work():
    a, b = operands(64, 64, 64, torch.float32, seed=4)
    with spyre_triton.profile() as prof:
        got, _ = run_mm(a, b)
    with spyre_triton.profile() as prof0:
        copied, _ = run_mm(a, b, elide_copies=False)
    assert same_bits(got, copied)
    r, r0 = prof.kernels[-1], prof0.kernels[-1]
    assert r.flops == r0.flops == 2 * 64 * 64 * 64 and r.dma_bytes == r0.dma_bytes


def test_out_of_bounds_operand_still_faults_at_the_line():
    a = torch.randn(64, 64, device=DEVICE)
    b = torch.randn(64, 64, device=DEVICE)
    c = torch.empty(128, 64, device=DEVICE)
    with pytest.raises(_runtime.DeviceError) as e:  # M = 128 rows of a, which has 64
        mm_kernel[(4, 2)](a, b, c, 128, 64, 64, 64, 1, 64, 1, BM=32, BN=32, BK=16, WRAP=True)
    assert "out-of-bounds load" in str(e.value) and "tl.load(a_ptrs" in str(e.value)
    got, _ = run_mm(a.cpu(), b.cpu())  # the device is still usable
    torch.testing.assert_close(got, a.cpu() @ b.cpu(), atol=1e-4, rtol=1e-4)


# -- hand-written programs ---------------------------------------------------------------------------
PROLOGUE = """.kernel k
.sregs 4
.lx 1024
.arg a ptr f32 s0
.arg b ptr f32 s1
.arg out ptr f32 s2
.const 0x3f800000
.desc [4, 4] [32, 4]
.desc [4, 4] [16, 4]
"""
MN = 4 << 16 | 4


def test_strided_rows_through_hand_written_views():
    # A is every other row pair of an 8-wide matrix (row stride 32 bytes), read in place
    body = f"""       ld.f32 x0, s0, d0, _, _, v0, rows=1
       ld.f32 x64, s1, d1, _, _, v1, rows=1
       dot.f32.f32 x128, @v0, @v1, _, {MN}, 4
       st.f32 s2, d1, x128, _, _
       halt
"""
    prog = parse_asm(PROLOGUE + body)
    assert parse_asm(prog.to_asm()).encode() == prog.encode()
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.arange(16, dtype=np.float32).reshape(4, 4) - 5
    da, db, out = DevBuf.of(a), DevBuf.of(b), DevBuf(64)
    _runtime.Kernel(prog.encode()).launch(0, 1, 1, 1, (da, db, out))
    np.testing.assert_array_equal(out.view(np.float32, 16).reshape(4, 4), a[:, :4] @ b)


def test_a_dot_before_its_loads_reads_dense_fallback_tiles_in_every_program():
    # the dot reads v0/v1 before the lds set them: their fallback tiles (all ones), read densely, in every
    # program; a row stride left over from the previous program's ld would read A's rows 2 and 3 from the
    # zeros after its tile
    body = f"""       const.f32 x0, k0, 16
       const.f32 x64, k1, 48
       const.f32 x256, k0, 16
       dot.f32.f32 x512, @v0, @v1, _, {MN}, 4
       st.f32 s2, d1, x512, _, _
       ld.f32 x0, s0, d0, _, _, v0, rows=1
       ld.f32 x256, s1, d1, _, _, v1, rows=1
       halt
"""
    k = _runtime.Kernel(parse_asm(PROLOGUE.replace(".const 0x3f800000", ".const 0x3f800000\n.const 0x0") + body).encode())
    da, db, out = DevBuf.of(np.full(32, 7, dtype=np.float32)), DevBuf.of(np.full(16, 3, dtype=np.float32)), DevBuf(64)
    for _ in range(2):
        k.launch(0, 3, 1, 1, (da, db, out))
        np.testing.assert_array_equal(out.view(np.float32, 16), np.full(16, 4, dtype=np.float32))


def test_the_loader_rejects_view_operands_of_a_batched_dot():
    body = f"""       ld.f32 x0, s0, d0, _, _, v0, rows=1
       dot.f32.f32 x128, @v0, x64, _, {MN}, 4, batch=2
       halt
"""
    with pytest.raises(ValueError, match="batched dot takes no view register"):
        _runtime.Kernel(parse_asm(PROLOGUE + body).encode())


# -- reductions over the rows of a 2-D tile ------------------------------------------------------------
@triton.jit
def reduce_kernel(x_ptr, out_ptr, M, N, stride_m, BM: tl.constexpr, BN: tl.constexpr, AXIS: tl.constexpr,
                  OP: tl.constexpr):
    # AXIS 0: per column over all rows, in BM-row steps (the strided axis); AXIS 1: per row over BN columns
    if AXIS == 0:
        cols = tl.program_id(0) * BN + tl.arange(0, BN)
        acc = tl.zeros((BN,), dtype=out_ptr.dtype.element_ty)
        for m in range(0, M, BM):
            rows = m + tl.arange(0, BM)
            x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=(rows[:, None] < M) & (cols[None, :] < N))
            if OP == "sum":
                acc += tl.sum(x, axis=0).to(acc.dtype)
            else:
                acc = tl.maximum(acc, tl.max(x, axis=0).to(acc.dtype))
        tl.store(out_ptr + cols, acc, mask=cols < N)
    else:
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.arange(0, BN)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=(rows[:, None] < M) & (cols[None, :] < N))
        r = tl.sum(x, axis=1) if OP == "sum" else tl.max(x, axis=1)
        tl.store(out_ptr + rows, r.to(out_ptr.dtype.element_ty), mask=rows < M)


def run_reduce(x, axis, op, BM, BN, **kw):
    M, N = x.shape
    out_dtype = torch.float32 if x.is_floating_point() else torch.int32
    out = torch.empty(N if axis == 0 else M, dtype=out_dtype, device=DEVICE)
    dx = x.to(DEVICE) if x.is_contiguous() else x.contiguous().to(DEVICE)
    grid = (triton.cdiv(N, BN),) if axis == 0 else (triton.cdiv(M, BM),)
    h = reduce_kernel[grid](dx, out, M, N, dx.stride(0), BM=BM, BN=BN, AXIS=axis, OP=op, **kw)
    return out.cpu(), h


def wider(x):
    """x as the left part of a wider matrix: rows strided further apart than their length"""
    big = torch.zeros(x.shape[0], x.shape[1] + 24, dtype=x.dtype)
    big[:, :x.shape[1]] = x
    return big, x.shape[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32], ids=str)
@pytest.mark.parametrize("axis,op", [(0, "sum"), (0, "max"), (1, "sum"), (1, "max")])
@pytest.mark.parametrize("M,N,padded", [(256, 128, False), (200, 100, False), (128, 64, True)])
def test_reductions_over_rows_in_place_give_the_bits_of_copies(dtype, axis, op, M, N, padded):
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(M, N, generator=g) * 4).to(dtype) if dtype.is_floating_point else \
        torch.randint(-1000, 1000, (M, N), generator=g, dtype=dtype)
    src = x
    if padded:
        src, n = wider(x)
        # the kernel sees N = n columns of each wider row
        out_dtype = torch.float32 if dtype.is_floating_point else torch.int32
        BM, BN = 32, 64
        out = torch.empty(n if axis == 0 else M, dtype=out_dtype, device=DEVICE)
        ds = src.to(DEVICE)
        grid = (triton.cdiv(n, BN),) if axis == 0 else (triton.cdiv(M, BM),)
        h = reduce_kernel[grid](ds, out, M, n, ds.stride(0), BM=BM, BN=BN, AXIS=axis, OP=op)
        out0 = torch.empty_like(out)
        reduce_kernel[grid](ds, out0, M, n, ds.stride(0), BM=BM, BN=BN, AXIS=axis, OP=op, elide_copies=False)
        got, copied = out.cpu(), out0.cpu()
    else:
        BM, BN = (32, 64) if axis == 0 else (16, triton.next_power_of_2(N))
        got, h = run_reduce(x, axis, op, BM, BN)
        copied, _ = run_reduce(x, axis, op, BM, BN, elide_copies=False)
    assert torch.equal(got.view(torch.int32), copied.view(torch.int32))
    ref = x.double().sum(axis) if op == "sum" else x.double().amax(axis)
    torch.testing.assert_close(got.double(), ref, atol=1e-2 * M ** 0.5 if dtype == torch.float16 else 1e-3, rtol=1e-3)
    if dtype == torch.float16 and op == "max":  # tl.max upcasts fp16 first: a cvt reads the tile, elementwise
        assert with_rows_flag(h) == 0
    else:
        # axis 0 loops over rows, and its first iteration is lowered on its own (ops.py, _peel_first_iteration)
        n = 2 if axis == 0 else 1
        assert row_loads(h) == n and reading_views(h, "red", "b") == n


@triton.jit
def sum_and_square_kernel(x_ptr, out_ptr, sq_ptr, stride_m, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :])
    tl.store(out_ptr + cols, tl.sum(x, axis=0))
    tl.store(sq_ptr + rows[:, None] * BN + cols[None, :], x * x)  # an elementwise reader: no rows view


def test_a_tile_also_read_elementwise_is_no_rows_view():
    x = torch.randn(16, 40)
    dx = x.to(DEVICE)
    out, sq = torch.empty(32, device=DEVICE), torch.empty(16, 32, device=DEVICE)
    h = sum_and_square_kernel[(1,)](dx, out, sq, 40, BM=16, BN=32)
    assert with_rows_flag(h) == 0
    torch.testing.assert_close(out.cpu(), x[:, :32].sum(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sq.cpu(), x[:, :32] ** 2)


@pytest.mark.parametrize("reader,error", [
    ("add.f32 x512, @v0, @v0, 16", "may hold strided rows"),
    ("red.f32 x512, @v0, 2, 2, 4, op=add", "may hold strided rows"),
])
def test_the_loader_rejects_other_readers_of_rows_views(reader, error):
    body = f"""       ld.f32 x0, s0, d0, _, _, v0, rows=1
       {reader}
       halt
"""
    with pytest.raises(ValueError, match=error):
        _runtime.Kernel(parse_asm(PROLOGUE + body).encode())


def test_hand_written_reductions_of_strided_rows():
    # red over axis 0 ([len 4, inner 4]) and axis 1 ([outer 4, len 4]) of every other row pair of an
    # 8-wide matrix, read in place at a 32-byte row stride
    body = """       ld.f32 x0, s0, d0, _, _, v0, rows=1
       red.f32 x128, @v0, 1, 4, 4, op=add
       red.f32 x144, @v0, 4, 4, 1, op=maxnum
       st.f32 s2, d1, x128, _, _
       halt
"""
    prog = parse_asm(PROLOGUE + body)
    a = (np.arange(32, dtype=np.float32) * 1.5 - 7).reshape(4, 8)
    da, out = DevBuf.of(a), DevBuf(64)
    _runtime.Kernel(prog.encode()).launch(0, 1, 1, 1, (da, da, out))
    got = out.view(np.float32, 16)
    np.testing.assert_array_equal(got[:4], a[:, :4].sum(0))
    np.testing.assert_array_equal(got[4:8], a[:, :4].max(1))
