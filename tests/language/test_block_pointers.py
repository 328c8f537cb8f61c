"""Block pointers on spyre: tl.make_block_ptr / tl.advance, tl.load and tl.store with boundary_check on each
axis (below 0 and past the shape), padding_option "zero" and "nan", order, strided and transposed views, a
shape smaller than the allocation, loops that advance forwards and backwards, 1-D, 2-D and 3-D blocks.

Triton rewrites block pointers into pointer arithmetic and masks before spyre sees the TTIR; the masks are
the `0 <= index < shape` tests of the checked axes. References are torch on the CPU; stores are checked to
leave everything outside the block (and outside the shape) untouched.
"""
import itertools

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE
pytestmark = pytest.mark.filterwarnings("ignore:tl.make_block_ptr is deprecated")
SENTINEL = -7.0


def dev(t):
    return t.to(DEVICE)


def window(src, offs, block, check, pad):
    """Reference for a block load: src[offs : offs+block] with pad where a checked axis is out of [0, shape)."""
    out = torch.full(block, pad, dtype=src.dtype)
    idx = [torch.arange(o, o + b) for o, b in zip(offs, block)]
    ok = [(i >= 0) & (i < s) for i, s in zip(idx, src.shape)]
    for ax in range(len(block)):
        assert ax in check or bool(ok[ax].all()), "test bug: an unchecked axis goes out of bounds"
    grids = torch.meshgrid(*idx, indexing="ij")
    oks = torch.meshgrid(*ok, indexing="ij")
    m = oks[0]
    for o in oks[1:]:
        m = m & o
    out[m] = src[tuple(g[m] for g in grids)]
    return out


def _pad_value(pad, dtype):
    return float("nan") if pad == "nan" else 0


# -- 2-D loads: every boundary_check, both paddings, both orders -----------------------------------
@triton.jit
def load_2d_kernel(src, dst, M, N, s0, s1, off0, off1, BM: tl.constexpr, BN: tl.constexpr, CHECK: tl.constexpr,
                   PAD: tl.constexpr, ORDER: tl.constexpr):
    bp = tl.make_block_ptr(src, shape=(M, N), strides=(s0, s1), offsets=(off0, off1), block_shape=(BM, BN),
                           order=ORDER)
    x = tl.load(bp, boundary_check=CHECK, padding_option=PAD)
    out = tl.make_block_ptr(dst, shape=(BM, BN), strides=(BN, 1), offsets=(0, 0), block_shape=(BM, BN),
                            order=(1, 0))
    tl.store(out, x)


# (offsets, boundary_check): the offsets put only the checked axes out of bounds
LOAD_2D = [
    ((0, 0), (0, 1)),  # in bounds, checked anyway
    ((20, 4), (0,)),  # rows past M
    ((-5, 4), (0,)),  # rows before 0
    ((3, 30), (1,)),  # columns past N
    ((3, -9), (1,)),  # columns before 0
    ((20, 30), (0, 1)),  # the bottom-right corner
    ((-6, -9), (0, 1)),  # the top-left corner
    ((-30, 40), (0, 1)),  # entirely outside
]


@pytest.mark.parametrize("order", [(1, 0), (0, 1)], ids=["order10", "order01"])
@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("offs,check", LOAD_2D, ids=[f"{o[0]}_{o[1]}-chk{''.join(map(str, c))}" for o, c in LOAD_2D])
def test_load_2d(offs, check, pad, order):
    M, N, BM, BN = 27, 35, 16, 16
    src = torch.randn(M, N)
    out = torch.empty(BM, BN, device=DEVICE)
    load_2d_kernel[(1,)](dev(src), out, M, N, src.stride(0), src.stride(1), *offs, BM=BM, BN=BN, CHECK=check,
                         PAD=pad, ORDER=order)
    ref = window(src, offs, (BM, BN), check, _pad_value(pad, src.dtype))
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("order", [(1, 0), (0, 1)], ids=["order10", "order01"])
def test_load_2d_unchecked_in_bounds(order):
    # no boundary_check and no padding_option (Triton's own RewriteTensorPointer pass fails to verify a
    # padding_option without a boundary_check: "mask type matches ptr type")
    src = torch.randn(27, 35)
    out = torch.empty(16, 16, device=DEVICE)
    load_2d_kernel[(1,)](dev(src), out, 27, 35, 35, 1, 3, 4, BM=16, BN=16, CHECK=(), PAD="", ORDER=order)
    assert torch.equal(out.cpu(), src[3:19, 4:20])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int32,
                                   torch.int64], ids=str)
def test_load_2d_dtypes_zero_padding(dtype):
    M, N = 13, 21
    src = (torch.randn(M, N) * 50).to(dtype)
    out = torch.empty(16, 16, dtype=dtype, device=DEVICE)
    load_2d_kernel[(1,)](dev(src), out, M, N, N, 1, 5, 9, BM=16, BN=16, CHECK=(0, 1), PAD="zero", ORDER=(1, 0))
    assert torch.equal(out.cpu(), window(src, (5, 9), (16, 16), (0, 1), 0))


def test_nan_padding_of_an_integer_block_is_refused():
    src = torch.zeros(8, 8, dtype=torch.int32, device=DEVICE)
    with pytest.raises(triton.CompilationError, match="nan.*not supported for integer"):
        load_2d_kernel[(1,)](src, torch.empty_like(src), 8, 8, 8, 1, 0, 0, BM=8, BN=8, CHECK=(0, 1), PAD="nan",
                             ORDER=(1, 0))


@pytest.mark.parametrize("order", [(1, 0), (0, 1)], ids=["order10", "order01"])
def test_load_of_a_transposed_view(order):
    # a column-major view: strides (1, M); order only describes the layout, the values are the same
    base = torch.randn(40, 24)
    src = base.t()  # shape (24, 40), strides (1, 24)
    out = torch.empty(16, 16, device=DEVICE)
    load_2d_kernel[(1,)](dev(base), out, 24, 40, src.stride(0), src.stride(1), 12, 30, BM=16, BN=16, CHECK=(0, 1),
                         PAD="zero", ORDER=order)
    assert torch.equal(out.cpu(), window(src.contiguous(), (12, 30), (16, 16), (0, 1), 0))


def test_shape_smaller_than_the_allocation_bounds_the_block():
    # the block pointer's shape, not the allocation, is the bound: a 10x12 window of a 32x32 tensor
    big = torch.randn(32, 32)
    out = torch.empty(16, 16, device=DEVICE)
    load_2d_kernel[(1,)](dev(big), out, 10, 12, 32, 1, 0, 0, BM=16, BN=16, CHECK=(0, 1), PAD="nan", ORDER=(1, 0))
    ref = torch.full((16, 16), float("nan"))
    ref[:10, :12] = big[:10, :12]
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)


# -- 2-D stores ------------------------------------------------------------------------------------
@triton.jit
def store_2d_kernel(src, dst, M, N, s0, s1, off0, off1, BM: tl.constexpr, BN: tl.constexpr, CHECK: tl.constexpr):
    x = tl.load(tl.make_block_ptr(src, shape=(BM, BN), strides=(BN, 1), offsets=(0, 0), block_shape=(BM, BN),
                                  order=(1, 0)))
    bp = tl.make_block_ptr(dst, shape=(M, N), strides=(s0, s1), offsets=(off0, off1), block_shape=(BM, BN),
                           order=(1, 0))
    tl.store(bp, x, boundary_check=CHECK)


STORE_2D = [
    ((2, 3), ()),
    ((20, 3), (0,)),
    ((-7, 3), (0,)),
    ((2, 25), (1,)),
    ((2, -4), (1,)),
    ((20, 25), (0, 1)),
    ((-7, -4), (0, 1)),
    ((100, 100), (0, 1)),
]


@pytest.mark.parametrize("offs,check", STORE_2D, ids=[f"{o[0]}_{o[1]}-chk{''.join(map(str, c))}" for o, c in STORE_2D])
def test_store_2d(offs, check):
    M, N, BM, BN = 27, 35, 16, 16
    tile = torch.randn(BM, BN)
    dst = torch.full((M, N), SENTINEL, device=DEVICE)
    store_2d_kernel[(1,)](dev(tile), dst, M, N, N, 1, *offs, BM=BM, BN=BN, CHECK=check)
    ref = torch.full((M, N), SENTINEL)
    for i, j in itertools.product(range(BM), range(BN)):
        r, c = offs[0] + i, offs[1] + j
        if 0 <= r < M and 0 <= c < N:
            ref[r, c] = tile[i, j]
    assert torch.equal(dst.cpu(), ref)


def test_store_into_a_window_leaves_the_rest_of_the_allocation():
    # shape (10, 12) inside a 32x32 tensor: elements past the shape are not written even though they exist
    big = torch.full((32, 32), SENTINEL, device=DEVICE)
    tile = torch.randn(16, 16)
    store_2d_kernel[(1,)](dev(tile), big, 10, 12, 32, 1, 0, 0, BM=16, BN=16, CHECK=(0, 1))
    ref = torch.full((32, 32), SENTINEL)
    ref[:10, :12] = tile[:10, :12]
    assert torch.equal(big.cpu(), ref)


# -- 1-D: a loop that advances, with the tail checked ----------------------------------------------
@triton.jit
def sum_1d_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, PAD: tl.constexpr):
    bp = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(0, tl.cdiv(n, BLOCK)):
        x = tl.load(bp, boundary_check=(0,), padding_option=PAD)
        acc += tl.where(x == x, x, 0.0)  # nan padding counts as nothing
        bp = tl.advance(bp, (BLOCK,))
    tl.store(out_ptr, tl.sum(acc, axis=0))


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("n", [1, 64, 100, 1000])
def test_1d_loop_with_advance_and_tail(n, pad):
    x = torch.randint(-9, 10, (n,)).float()
    out = torch.zeros(1, device=DEVICE)
    sum_1d_kernel[(1,)](dev(x), out, n, BLOCK=64, PAD=pad)
    assert out.item() == x.sum().item()


@triton.jit
def reverse_1d_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # walk backwards from the last block with a negative advance; the first block starts below 0
    nb = tl.cdiv(n, BLOCK)
    src = tl.make_block_ptr(x_ptr, shape=(n,), strides=(1,), offsets=(n - BLOCK,), block_shape=(BLOCK,), order=(0,))
    dst = tl.make_block_ptr(y_ptr, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    for _ in range(nb):
        x = tl.load(src, boundary_check=(0,), padding_option="zero")
        tl.store(dst, tl.flip(x, 0), boundary_check=(0,))
        src = tl.advance(src, (-BLOCK,))
        dst = tl.advance(dst, (BLOCK,))


@pytest.mark.parametrize("n", [32, 77])
def test_1d_negative_advance(n):
    x = torch.arange(n, dtype=torch.float32) + 1
    y = torch.full((n,), SENTINEL, device=DEVICE)
    reverse_1d_kernel[(1,)](dev(x), y, n, BLOCK=16)
    assert torch.equal(y.cpu(), x.flip(0))


# -- 2-D in a loop: matmul with block pointers -----------------------------------------------------
@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, ORDER_B: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    ap = tl.make_block_ptr(a, shape=(M, K), strides=(sam, sak), offsets=(pm * BM, 0), block_shape=(BM, BK),
                           order=(1, 0))
    bp = tl.make_block_ptr(b, shape=(K, N), strides=(sbk, sbn), offsets=(0, pn * BN), block_shape=(BK, BN),
                           order=ORDER_B)
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        acc += tl.dot(tl.load(ap, boundary_check=(0, 1), padding_option="zero"),
                      tl.load(bp, boundary_check=(0, 1), padding_option="zero"))
        ap = tl.advance(ap, (0, BK))
        bp = tl.advance(bp, (BK, 0))
    cp = tl.make_block_ptr(c, shape=(M, N), strides=(scm, scn), offsets=(pm * BM, pn * BN), block_shape=(BM, BN),
                           order=(1, 0))
    tl.store(cp, acc, boundary_check=(0, 1))


@pytest.mark.parametrize("b_transposed", [False, True], ids=["b_rowmajor", "b_colmajor"])
@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (37, 29, 45)])
def test_matmul_loop_with_advance(M, N, K, b_transposed):
    torch.manual_seed(0)
    a = torch.randn(M, K)
    b = torch.randn(N, K).t() if b_transposed else torch.randn(K, N)
    c = torch.full((M, N), SENTINEL, device=DEVICE)
    bd = dev(b.t().contiguous()).t() if b_transposed else dev(b)
    BM = BN = BK = 16
    matmul_kernel[(triton.cdiv(M, BM), triton.cdiv(N, BN))](
        dev(a), bd, c, M, N, K, a.stride(0), a.stride(1), bd.stride(0), bd.stride(1), c.stride(0), c.stride(1),
        BM=BM, BN=BN, BK=BK, ORDER_B=(0, 1) if b_transposed else (1, 0))
    torch.testing.assert_close(c.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@triton.jit
def tiled_copy_kernel(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # one program walks its block row across the columns, loading and storing through advanced pointers
    src = tl.make_block_ptr(x, shape=(M, N), strides=(N, 1), offsets=(tl.program_id(0) * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(y, shape=(M, N), strides=(N, 1), offsets=(tl.program_id(0) * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    for _ in range(0, tl.cdiv(N, BN)):
        tl.store(dst, tl.load(src, boundary_check=(0, 1)) * 2, boundary_check=(0, 1))
        src = tl.advance(src, (0, BN))
        dst = tl.advance(dst, (0, BN))


def test_load_store_loop_covers_a_ragged_tensor():
    x = torch.randn(45, 70)
    y = torch.full((45, 70), SENTINEL, device=DEVICE)
    tiled_copy_kernel[(3,)](dev(x), y, 45, 70, BM=16, BN=32)
    assert torch.equal(y.cpu(), x * 2)


# -- 3-D -------------------------------------------------------------------------------------------
@triton.jit
def load_store_3d_kernel(src, dst, A, B, C, sa, sb, sc, o0, o1, o2, BA: tl.constexpr, BB: tl.constexpr,
                         BC: tl.constexpr, CHECK: tl.constexpr, PAD: tl.constexpr, ORDER: tl.constexpr):
    bp = tl.make_block_ptr(src, shape=(A, B, C), strides=(sa, sb, sc), offsets=(o0, o1, o2),
                           block_shape=(BA, BB, BC), order=ORDER)
    x = tl.load(bp, boundary_check=CHECK, padding_option=PAD)
    out = tl.make_block_ptr(dst, shape=(BA, BB, BC), strides=(BB * BC, BC, 1), offsets=(0, 0, 0),
                            block_shape=(BA, BB, BC), order=(2, 1, 0))
    tl.store(out, x)
    # and store the block back, shifted by one along each axis, through the same bounds
    back = tl.advance(bp, (1, 1, 1))
    tl.store(back, x + 1000, boundary_check=CHECK)


LOAD_3D = [
    ((0, 0, 0), (0, 1, 2), (2, 1, 0)),
    ((3, 0, 0), (0,), (2, 1, 0)),
    ((0, -2, 0), (1,), (0, 1, 2)),
    ((0, 0, 6), (2,), (1, 2, 0)),
    ((-1, 5, 7), (0, 1, 2), (2, 0, 1)),
]


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("offs,check,order", LOAD_3D,
                         ids=[f"{'_'.join(map(str, o))}-chk{''.join(map(str, c))}" for o, c, _ in LOAD_3D])
def test_3d(offs, check, order, pad):
    A, B, C, BA, BB, BC = 5, 9, 11, 4, 4, 8
    src = torch.randn(A, B, C)
    srcd = dev(src)
    out = torch.empty(BA, BB, BC, device=DEVICE)
    load_store_3d_kernel[(1,)](srcd, out, A, B, C, *src.stride(), *offs, BA=BA, BB=BB, BC=BC, CHECK=check, PAD=pad,
                               ORDER=order)
    ref = window(src, offs, (BA, BB, BC), check, _pad_value(pad, src.dtype))
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)
    # the store back: in-bounds elements of the shifted block hold loaded value + 1000
    want = src.clone()
    for i, j, k in itertools.product(range(BA), range(BB), range(BC)):
        p = (offs[0] + 1 + i, offs[1] + 1 + j, offs[2] + 1 + k)
        if all(0 <= q < s for q, s in zip(p, (A, B, C))):
            want[p] = ref[i, j, k] + 1000
    torch.testing.assert_close(srcd.cpu(), want, equal_nan=True, rtol=0, atol=0)


# -- block pointers built per program, from a scalar base ------------------------------------------
@triton.jit
def rows_kernel(x, y, M, N, stride, BN: tl.constexpr):
    row = tl.program_id(0)
    # the base moves per program; the block pointer is 1-D over one row
    src = tl.make_block_ptr(x + row * stride, shape=(N,), strides=(1,), offsets=(0,), block_shape=(BN,), order=(0,))
    dst = tl.make_block_ptr(y + row * N, shape=(N,), strides=(1,), offsets=(0,), block_shape=(BN,), order=(0,))
    v = tl.load(src, boundary_check=(0,), padding_option="zero")
    tl.store(dst, v - tl.max(tl.where(tl.arange(0, BN) < N, v, -float("inf")), axis=0), boundary_check=(0,))


def test_block_pointer_from_a_per_program_base_on_a_strided_tensor():
    full = torch.randn(9, 64)
    x = full[:, :50]  # row stride 64, 50 columns
    y = torch.full((9, 50), SENTINEL, device=DEVICE)
    rows_kernel[(9,)](dev(full), y, 9, 50, 64, BN=64)
    torch.testing.assert_close(y.cpu(), x - x.amax(1, keepdim=True), rtol=0, atol=0)


# -- bool blocks, runtime advance steps ------------------------------------------------------------
@triton.jit
def bool_copy_kernel(src, dst, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Triton makes an i1 block pointer an i8 one: the loaded values are 0/1 bytes
    s = tl.make_block_ptr(src, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    d = tl.make_block_ptr(dst, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(d, tl.load(s, boundary_check=(0, 1), padding_option="zero"), boundary_check=(0, 1))


def test_bool_block_pointers():
    x = torch.rand(5, 7) > 0.5
    y = torch.zeros(5, 7, dtype=torch.bool, device=DEVICE)
    bool_copy_kernel[(1,)](dev(x), y, 5, 7, BM=8, BN=8)
    assert torch.equal(y.cpu(), x)


@triton.jit
def runtime_advance_kernel(src, out, M, N, step, BM: tl.constexpr, BN: tl.constexpr):
    bp = tl.make_block_ptr(src, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(3):
        acc += tl.load(bp, boundary_check=(0, 1), padding_option="zero")
        bp = tl.advance(bp, (step, step * 2))  # a step only known at run time
    tl.store(out + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)


@pytest.mark.parametrize("step", [7, -3])
def test_advance_by_a_runtime_step(step):
    M, N = 20, 30
    x = torch.randn(M, N)
    out = torch.empty(8, 8, device=DEVICE)
    runtime_advance_kernel[(1,)](dev(x), out, M, N, step, BM=8, BN=8)
    ref = sum(window(x, (k * step, 2 * k * step), (8, 8), (0, 1), 0) for k in range(3))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-6, atol=1e-6)
