"""Tensor descriptors on spyre: tl.make_tensor_descriptor (device side) and host-side
triton.tools.tensor_descriptor.TensorDescriptor arguments; load and store of boxes in and out of bounds
(below 0 and past the shape, on every axis), padding "zero" and "nan", 1-D to 5-D, descriptors over strided
views, in loops and in noinline functions, desc.gather / desc.scatter of rows (out-of-range rows and
columns), and the descriptor reductions (desc.atomic_add/min/max/and/or/xor).

Triton rewrites descriptors into pointer arithmetic with `0 <= index < shape` masks
(triton-rewrite-tensor-descriptor-to-pointer) before spyre lowers the TTIR. References are torch on the CPU.
"""
import itertools

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from conftest import DEVICE
SENTINEL = -7


def dev(t):
    return t.to(DEVICE)


def window(src, offs, block, pad):
    """src[offs : offs+block] with pad outside [0, shape) on any axis."""
    out = torch.full(block, pad, dtype=src.dtype)
    idx = [torch.arange(o, o + b) for o, b in zip(offs, block)]
    ok = [(i >= 0) & (i < s) for i, s in zip(idx, src.shape)]
    grids = torch.meshgrid(*idx, indexing="ij")
    oks = torch.meshgrid(*ok, indexing="ij")
    m = oks[0]
    for o in oks[1:]:
        m = m & o
    out[m] = src[tuple(g[m] for g in grids)]
    return out


def placed(dst, tile, offs):
    """dst with tile written at offs, the elements outside dst's shape dropped."""
    out = dst.clone()
    for idx in itertools.product(*(range(b) for b in tile.shape)):
        p = tuple(o + i for o, i in zip(offs, idx))
        if all(0 <= q < s for q, s in zip(p, dst.shape)):
            out[p] = tile[idx]
    return out


def _pad(pad):
    return float("nan") if pad == "nan" else 0


# -- device-side descriptors: 2-D load and store, boxes in and out of bounds -----------------------
@triton.jit
def dev_load_2d_kernel(src, dst, M, N, stride, o0, o1, BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    d = tl.make_tensor_descriptor(src, shape=[M, N], strides=[stride, 1], block_shape=[BM, BN], padding_option=PAD)
    x = d.load([o0, o1])
    tl.store(dst + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], x)


# box offsets (the inner one a multiple of 16 bytes, as TMA requires)
BOXES_2D = [(0, 0), (8, 16), (30, 0), (0, 32), (30, 40), (-5, 0), (0, -8), (-10, -12), (64, 0), (0, -64)]


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("offs", BOXES_2D, ids=[f"{a}_{b}" for a, b in BOXES_2D])
def test_device_load_2d(offs, pad):
    M, N, BM, BN = 37, 44, 16, 16
    src = torch.randn(M, N)
    out = torch.empty(BM, BN, device=DEVICE)
    dev_load_2d_kernel[(1,)](dev(src), out, M, N, N, *offs, BM=BM, BN=BN, PAD=pad)
    torch.testing.assert_close(out.cpu(), window(src, offs, (BM, BN), _pad(pad)), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                                   torch.float64, torch.float8_e4m3fn], ids=str)
def test_device_load_2d_dtypes(dtype):
    M, N = 21, 70
    src = (torch.randn(M, N) * 40).clamp(-100, 100).to(dtype)
    BN = max(16, 16 // src.element_size())  # at least 16 bytes per row
    out = torch.empty(8, BN, dtype=dtype, device=DEVICE)
    dev_load_2d_kernel[(1,)](dev(src), out, M, N, N, 17, 64, BM=8, BN=BN, PAD="zero")
    ref = window(src.view(torch.uint8) if dtype == torch.float8_e4m3fn else src, (17, 64), (8, BN), 0)
    got = out.cpu().view(torch.uint8) if dtype == torch.float8_e4m3fn else out.cpu()
    assert torch.equal(got, ref)


@triton.jit
def dev_store_2d_kernel(src, dst, M, N, stride, o0, o1, BM: tl.constexpr, BN: tl.constexpr):
    x = tl.load(src + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    d = tl.make_tensor_descriptor(dst, shape=[M, N], strides=[stride, 1], block_shape=[BM, BN])
    d.store([o0, o1], x)


@pytest.mark.parametrize("offs", BOXES_2D, ids=[f"{a}_{b}" for a, b in BOXES_2D])
def test_device_store_2d(offs):
    M, N, BM, BN = 37, 44, 16, 16
    tile = torch.randn(BM, BN)
    dst = torch.full((M, N), float(SENTINEL), device=DEVICE)
    dev_store_2d_kernel[(1,)](dev(tile), dst, M, N, N, *offs, BM=BM, BN=BN)
    assert torch.equal(dst.cpu(), placed(torch.full((M, N), float(SENTINEL)), tile, offs))


def test_device_store_converts_the_value_to_the_descriptor_dtype():
    # desc.store casts implicitly: an f32 tile into an f16 tensor
    tile = torch.randn(16, 16)
    dst = torch.zeros(16, 16, dtype=torch.float16, device=DEVICE)
    dev_store_2d_kernel[(1,)](dev(tile), dst, 16, 16, 16, 0, 0, BM=16, BN=16)
    assert torch.equal(dst.cpu(), tile.half())


def test_shape_smaller_than_the_allocation():
    # a descriptor over the top-left 10x12 of a 32x32 tensor: its shape, not the allocation, bounds the box
    big = torch.randn(32, 32)
    out = torch.empty(16, 16, device=DEVICE)
    dev_load_2d_kernel[(1,)](dev(big), out, 10, 12, 32, 0, 0, BM=16, BN=16, PAD="nan")
    torch.testing.assert_close(out.cpu(), window(big[:10, :12], (0, 0), (16, 16), float("nan")), equal_nan=True,
                               rtol=0, atol=0)
    bigd = torch.full((32, 32), float(SENTINEL), device=DEVICE)
    tile = torch.randn(16, 16)
    dev_store_2d_kernel[(1,)](dev(tile), bigd, 10, 12, 32, 0, 0, BM=16, BN=16)
    ref = torch.full((32, 32), float(SENTINEL))
    ref[:10, :12] = tile[:10, :12]
    assert torch.equal(bigd.cpu(), ref)


# -- 1-D to 5-D --------------------------------------------------------------------------------------
@triton.jit
def nd_kernel(src, dst, out, s0, s1, s2, s3, s4, o0, o1, o2, o3, o4, NDIM: tl.constexpr, B0: tl.constexpr,
              B1: tl.constexpr, B2: tl.constexpr, B3: tl.constexpr, B4: tl.constexpr, PAD: tl.constexpr):
    # shapes s*, contiguous strides; loads the box at o* into `out` (dense) and stores it back into dst at o*
    if NDIM == 1:
        d = tl.make_tensor_descriptor(src, [s0], [1], [B4], padding_option=PAD)
        e = tl.make_tensor_descriptor(dst, [s0], [1], [B4])
        x = d.load([o0])
        e.store([o0], x)
        tl.store(out + tl.arange(0, B4), x)
    elif NDIM == 3:
        d = tl.make_tensor_descriptor(src, [s0, s1, s2], [s1 * s2, s2, 1], [B2, B3, B4], padding_option=PAD)
        e = tl.make_tensor_descriptor(dst, [s0, s1, s2], [s1 * s2, s2, 1], [B2, B3, B4])
        x = d.load([o0, o1, o2])
        e.store([o0, o1, o2], x)
        i = (tl.arange(0, B2)[:, None, None] * (B3 * B4) + tl.arange(0, B3)[None, :, None] * B4
             + tl.arange(0, B4)[None, None, :])
        tl.store(out + i, x)
    elif NDIM == 4:
        d = tl.make_tensor_descriptor(src, [s0, s1, s2, s3], [s1 * s2 * s3, s2 * s3, s3, 1], [B1, B2, B3, B4],
                                      padding_option=PAD)
        e = tl.make_tensor_descriptor(dst, [s0, s1, s2, s3], [s1 * s2 * s3, s2 * s3, s3, 1], [B1, B2, B3, B4])
        x = d.load([o0, o1, o2, o3])
        e.store([o0, o1, o2, o3], x)
        tl.store(out + tl.arange(0, B1 * B2 * B3 * B4), x.reshape(B1 * B2 * B3 * B4))
    else:
        d = tl.make_tensor_descriptor(src, [s0, s1, s2, s3, s4], [s1 * s2 * s3 * s4, s2 * s3 * s4, s3 * s4, s4, 1],
                                      [B0, B1, B2, B3, B4], padding_option=PAD)
        e = tl.make_tensor_descriptor(dst, [s0, s1, s2, s3, s4], [s1 * s2 * s3 * s4, s2 * s3 * s4, s3 * s4, s4, 1],
                                      [B0, B1, B2, B3, B4])
        x = d.load([o0, o1, o2, o3, o4])
        e.store([o0, o1, o2, o3, o4], x)
        tl.store(out + tl.arange(0, B0 * B1 * B2 * B3 * B4), x.reshape(B0 * B1 * B2 * B3 * B4))


ND = [  # (shape, block, offsets)
    ((50,), (16,), (40,)),
    ((50,), (16,), (-4,)),
    ((5, 6, 20), (4, 4, 8), (3, -1, 16)),
    ((5, 6, 20), (2, 8, 4), (0, 0, 0)),
    ((3, 4, 5, 12), (2, 2, 4, 8), (2, -1, 3, 8)),
    ((2, 3, 3, 4, 8), (2, 2, 2, 2, 4), (1, 2, -1, 3, 4)),
]


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("shape,block,offs", ND, ids=[f"{len(s)}d-{'_'.join(map(str, o))}" for s, _, o in ND])
def test_nd_load_store(shape, block, offs, pad):
    nd = len(shape)
    src = torch.randn(shape)
    dst = torch.full(shape, float(SENTINEL), device=DEVICE)
    out = torch.empty(block, device=DEVICE)
    s = tuple(shape) + (1,) * (5 - nd)  # the kernel reads the first nd shapes and offsets
    o = tuple(offs) + (0,) * (5 - nd)
    b = (1,) * (5 - nd) + tuple(block)  # and the last nd block sizes
    nd_kernel[(1,)](dev(src), dst, out, *s, *o, NDIM=nd, B0=b[0], B1=b[1], B2=b[2], B3=b[3], B4=b[4], PAD=pad)
    ref = window(src, offs, block, _pad(pad))
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, rtol=0, atol=0)
    # stored back at the same box: exactly the in-bounds part of src appears, the rest stays the sentinel
    want = placed(torch.full(shape, float(SENTINEL)), ref, offs)
    torch.testing.assert_close(dst.cpu(), want, equal_nan=True, rtol=0, atol=0)


# -- host-side TensorDescriptor arguments ------------------------------------------------------------
@triton.jit
def host_copy_kernel(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.program_id(0) * BM
    n = tl.program_id(1) * BN
    out_desc.store([m, n], in_desc.load([m, n]) * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("shape", [(40, 48), (33, 80)])  # row strides of 16-byte multiples, as TMA requires
def test_host_descriptors_grid_over_a_ragged_tensor(shape, dtype):
    x = (torch.randn(shape) * 20).clamp(-60, 60).to(dtype)
    y = torch.full(shape, SENTINEL, dtype=dtype, device=DEVICE)
    block = [16, 32]
    grid = (triton.cdiv(shape[0], 16), triton.cdiv(shape[1], 32))
    host_copy_kernel[grid](TensorDescriptor.from_tensor(dev(x), block), TensorDescriptor.from_tensor(y, block),
                           BM=16, BN=32)
    assert torch.equal(y.cpu(), x * 2)


@triton.jit
def host_load_kernel(in_desc, out, o0, o1, BM: tl.constexpr, BN: tl.constexpr):
    x = in_desc.load([o0, o1])
    tl.store(out + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], x)


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("offs", [(30, 32), (-8, -16), (100, 0)], ids=["corner", "negative", "outside"])
def test_host_descriptor_padding(offs, pad):
    x = torch.randn(40, 48)
    out = torch.empty(16, 32, device=DEVICE)
    desc = TensorDescriptor(dev(x), x.shape, x.stride(), [16, 32], padding=pad)
    host_load_kernel[(1,)](desc, out, *offs, BM=16, BN=32)
    torch.testing.assert_close(out.cpu(), window(x, offs, (16, 32), _pad(pad)), equal_nan=True, rtol=0, atol=0)


def test_host_descriptor_of_a_strided_view():
    # the first 40 columns of a 24x64 tensor (row stride 64) and a transposed-back view of a column block
    base = torch.randn(24, 64)
    xb = dev(base)
    view = xb[:, :40]
    out = torch.empty(16, 32, device=DEVICE)
    host_load_kernel[(1,)](TensorDescriptor(view, view.shape, view.stride(), [16, 32]), out, 16, 32, BM=16, BN=32)
    assert torch.equal(out.cpu(), window(base[:, :40], (16, 32), (16, 32), 0))
    # and a store through a view descriptor leaves the columns outside the view alone
    y = torch.full((24, 64), float(SENTINEL), device=DEVICE)
    yv = y[:, 8:48]
    host_copy_kernel[(2, 2)](TensorDescriptor(view, view.shape, view.stride(), [16, 32]),
                             TensorDescriptor(yv, yv.shape, yv.stride(), [16, 32]), BM=16, BN=32)
    ref = torch.full((24, 64), float(SENTINEL))
    ref[:, 8:48] = base[:, :40] * 2
    assert torch.equal(y.cpu(), ref)


@triton.jit
def host_3d_kernel(in_desc, out_desc, B: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    b = tl.program_id(0) * B
    x = in_desc.load([b, 0, 0])
    out_desc.store([b, 0, 0], tl.permute(x, (0, 2, 1)) + 1)


def test_host_descriptor_3d():
    x = torch.randn(6, 16, 16)
    y = torch.zeros(6, 16, 16, device=DEVICE)
    host_3d_kernel[(3,)](TensorDescriptor.from_tensor(dev(x), [2, 16, 16]),
                         TensorDescriptor.from_tensor(y, [2, 16, 16]), B=2, BM=16, BN=16)
    assert torch.equal(y.cpu(), x.transpose(1, 2) + 1)


# -- in loops and functions ------------------------------------------------------------------------
@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    ad = tl.make_tensor_descriptor(a, [M, K], [K, 1], [BM, BK])
    bd = tl.make_tensor_descriptor(b, [K, N], [N, 1], [BK, BN])
    cd = tl.make_tensor_descriptor(c, [M, N], [N, 1], [BM, BN])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):  # the last box runs past K: zero padding keeps the sum exact
        acc = tl.dot(ad.load([pm * BM, k]), bd.load([k, pn * BN]), acc)
    cd.store([pm * BM, pn * BN], acc)


@pytest.mark.parametrize("M,N,K", [(32, 32, 32), (40, 36, 52)])
def test_matmul_loop(M, N, K):
    torch.manual_seed(0)
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.full((M, N), float(SENTINEL), device=DEVICE)
    matmul_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](dev(a), dev(b), c, M, N, K, BM=16, BN=16, BK=16)
    torch.testing.assert_close(c.cpu(), a @ b, rtol=1e-4, atol=1e-4)


@triton.jit(noinline=True)
def _abs_box(in_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    i = tl.make_tensor_descriptor(in_ptr, [M, N], [N, 1], [BM, BN])
    o = tl.make_tensor_descriptor(out_ptr, [M, N], [N, 1], [BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    o.store([m, n], tl.abs(i.load([m, n])))


@triton.jit
def _make_desc(ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    return tl.make_tensor_descriptor(ptr, [M, N], [N, 1], [BM, BN])


@triton.jit
def functions_kernel(x, y, z, M, N, BM: tl.constexpr, BN: tl.constexpr):
    _abs_box(x, y, M, N, BM, BN)  # descriptors made inside a noinline function
    d = _make_desc(x, M, N, BM, BN)  # a descriptor returned from a function
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    _make_desc(z, M, N, BM, BN).store([m, n], d.load([m, n]) * 3)


def test_descriptors_in_noinline_and_returning_functions():
    x = torch.randn(20, 40)
    y = torch.zeros(20, 40, device=DEVICE)
    z = torch.zeros(20, 40, device=DEVICE)
    functions_kernel[(2, 2)](dev(x), y, z, 20, 40, BM=16, BN=32)
    assert torch.equal(y.cpu(), x.abs())
    assert torch.equal(z.cpu(), x * 3)


# -- gather / scatter of rows ----------------------------------------------------------------------
@triton.jit
def gather_kernel(src, idx_ptr, out, X, Y, y0, BX: tl.constexpr, BY: tl.constexpr, PAD: tl.constexpr):
    d = tl.make_tensor_descriptor(src, [X, Y], [Y, 1], [1, BY], padding_option=PAD)
    rows = d.gather(tl.load(idx_ptr + tl.arange(0, BX)), y0)
    tl.store(out + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :], rows)


def gather_ref(src, idx, y0, by, pad):
    out = torch.full((len(idx), by), pad, dtype=src.dtype)
    for r, i in enumerate(idx.tolist()):
        for c in range(by):
            if 0 <= i < src.shape[0] and 0 <= y0 + c < src.shape[1]:
                out[r, c] = src[i, y0 + c]
    return out


GATHER = [  # (rows, y0): in range with repeats, rows past X and below 0, columns past Y and below 0
    ("perm", 0), ("repeat", 16), ("oob_rows", 0), ("perm", 48), ("oob_rows", -8),
]


def _rows(kind, bx, x):
    g = torch.Generator().manual_seed(5)
    if kind == "perm":
        return torch.randperm(x, generator=g)[:bx].int()
    if kind == "repeat":
        return torch.randint(0, 4, (bx,), generator=g).int()
    r = torch.randperm(x, generator=g)[:bx].int()
    r[::3] = x + torch.arange(len(r[::3])).int()
    r[1::5] = -1 - torch.arange(len(r[1::5])).int()
    return r


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8], ids=str)
@pytest.mark.parametrize("kind,y0", GATHER, ids=[f"{k}-y{y}" for k, y in GATHER])
def test_gather_rows(kind, y0, dtype):
    X, Y, BX, BY = 40, 64, 16, 32
    src = (torch.randn(X, Y) * 30).clamp(-100, 100).to(dtype)
    idx = _rows(kind, BX, X)
    out = torch.empty(BX, BY, dtype=dtype, device=DEVICE)
    gather_kernel[(1,)](dev(src), dev(idx), out, X, Y, y0, BX=BX, BY=BY, PAD="zero")
    assert torch.equal(out.cpu(), gather_ref(src, idx, y0, BY, 0))


def test_gather_rows_nan_padding():
    src = torch.randn(40, 64)
    idx = _rows("oob_rows", 16, 40)
    out = torch.empty(16, 32, device=DEVICE)
    gather_kernel[(1,)](dev(src), dev(idx), out, 40, 64, 48, BX=16, BY=32, PAD="nan")
    torch.testing.assert_close(out.cpu(), gather_ref(src, idx, 48, 32, float("nan")), equal_nan=True, rtol=0,
                               atol=0)


@triton.jit
def scatter_kernel(dst, idx_ptr, src, X, Y, y0, BX: tl.constexpr, BY: tl.constexpr):
    d = tl.make_tensor_descriptor(dst, [X, Y], [Y, 1], [1, BY])
    v = tl.load(src + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :])
    d.scatter(v, tl.load(idx_ptr + tl.arange(0, BX)), y0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8], ids=str)
@pytest.mark.parametrize("kind,y0", [("perm", 0), ("perm", 48), ("oob_rows", 16), ("oob_rows", -8)],
                         ids=["perm-y0", "perm-y48", "oob_rows-y16", "oob_rows-y-8"])
def test_scatter_rows(kind, y0, dtype):
    X, Y, BX, BY = 40, 64, 16, 32
    vals = (torch.randn(BX, BY) * 30).clamp(-100, 100).to(dtype)
    idx = _rows(kind, BX, X)  # distinct in-range rows: the result does not depend on the order of writes
    dst = torch.full((X, Y), SENTINEL, dtype=dtype, device=DEVICE)
    scatter_kernel[(1,)](dst, dev(idx), dev(vals), X, Y, y0, BX=BX, BY=BY)
    ref = torch.full((X, Y), SENTINEL, dtype=dtype)
    for r, i in enumerate(idx.tolist()):
        for c in range(BY):
            if 0 <= i < X and 0 <= y0 + c < Y:
                ref[i, y0 + c] = vals[r, c]
    assert torch.equal(dst.cpu(), ref)


# -- descriptor reductions -------------------------------------------------------------------------
@triton.jit
def reduce_kernel(dst, val, M, N, o0, o1, KIND: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    d = tl.make_tensor_descriptor(dst, [M, N], [N, 1], [BM, BN])
    v = tl.load(val + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    if KIND == "add":
        d.atomic_add([o0, o1], v)
    elif KIND == "min":
        d.atomic_min([o0, o1], v)
    elif KIND == "max":
        d.atomic_max([o0, o1], v)
    elif KIND == "and":
        d.atomic_and([o0, o1], v)
    elif KIND == "or":
        d.atomic_or([o0, o1], v)
    else:
        d.atomic_xor([o0, o1], v)


REDUCE = [("add", torch.int32), ("add", torch.float32), ("add", torch.float16), ("add", torch.uint64),
          ("min", torch.int32), ("max", torch.int64), ("min", torch.uint32), ("and", torch.int32),
          ("or", torch.int64), ("xor", torch.uint32)]
_TORCH_OP = {"add": lambda a, b: a + b, "min": torch.minimum, "max": torch.maximum, "and": torch.bitwise_and,
             "or": torch.bitwise_or, "xor": torch.bitwise_xor}


@pytest.mark.parametrize("offs", [(0, 0), (10, 24)], ids=["inside", "corner"])
@pytest.mark.parametrize("kind,dtype", REDUCE, ids=[f"{k}-{str(d)[6:]}" for k, d in REDUCE])
def test_descriptor_reductions(kind, dtype, offs):
    M, N, BM, BN = 18, 40, 16, 16
    g = torch.Generator().manual_seed(0)
    wide = torch.int64
    init = torch.randint(-1000, 1000, (M, N), generator=g)
    v = torch.randint(-1000, 1000, (BM, BN), generator=g)
    if dtype in (torch.uint32, torch.uint64):
        init, v = init.abs(), v.abs()
    dst = dev(init.to(dtype))
    reduce_kernel[(1,)](dst, dev(v.to(dtype)), M, N, *offs, KIND=kind, BM=BM, BN=BN)
    base = init.to(wide) if not dtype.is_floating_point else init.to(dtype).double()
    vv = v.to(wide) if not dtype.is_floating_point else v.to(dtype).double()
    full = base.clone()
    for i, j in itertools.product(range(BM), range(BN)):
        p = (offs[0] + i, offs[1] + j)
        if p[0] < M and p[1] < N:
            full[p] = _TORCH_OP[kind](base[p], vv[i, j])
    assert torch.equal(dst.cpu().to(full.dtype), full.to(dtype).to(full.dtype))


# -- what Triton refuses ---------------------------------------------------------------------------
@triton.jit
def bad_block_kernel(src, BN: tl.constexpr):
    d = tl.make_tensor_descriptor(src, [4, 4], [4, 1], [4, BN])
    d.load([0, 0])


def test_descriptor_rows_under_16_bytes_are_refused():
    with pytest.raises(triton.CompilationError, match="at least 16 bytes"):
        bad_block_kernel[(1,)](torch.zeros(16, device=DEVICE), BN=2)
