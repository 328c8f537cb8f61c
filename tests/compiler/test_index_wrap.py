"""Integer index arithmetic wraps as Triton's does (two's complement in the value's type), also where
the compiler keeps it affine (base + coef * idx) and rewrites it term by term: casts, addptr, index
splits and masks (splits.may_wrap). Oracle: numpy's wrapping array arithmetic, bit for bit."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import insns
from conftest import DEVICE

TYPES = {  # name: (tl type, numpy type)
    "int8": (tl.int8, np.int8), "int16": (tl.int16, np.int16), "int32": (tl.int32, np.int32),
    "int64": (tl.int64, np.int64), "uint8": (tl.uint8, np.uint8), "uint16": (tl.uint16, np.uint16),
    "uint32": (tl.uint32, np.uint32), "uint64": (tl.uint64, np.uint64),
}


@triton.jit
def k_products(O, S, DT: tl.constexpr):
    i = tl.arange(0, 8).to(DT)
    s = S.to(DT)
    tl.store(O + i, (i * s).to(tl.int64))
    tl.store(O + 8 + i, ((i + 5) * s).to(tl.int64))
    tl.store(O + 16 + i, (s - i * s).to(tl.int64))
    tl.store(O + 24 + i, (-(i * s)).to(tl.int64))


def _wrap(values, np_t):
    return np.array([v & 0xFFFFFFFFFFFFFFFF for v in values], dtype=np.uint64).astype(np_t)


@pytest.mark.parametrize("S_sign", [1, -1])
@pytest.mark.parametrize("name", list(TYPES))
def test_index_times_a_scalar_wraps(name, S_sign):
    tl_t, np_t = TYPES[name]
    bits = np.dtype(np_t).itemsize * 8
    S = S_sign * (2 ** (bits - 2) + 3)  # i * S leaves the type from i = 4
    o = torch.zeros(32, dtype=torch.int64, device=DEVICE)
    k_products[(1,)](o, S, DT=tl_t)
    i, s = np.arange(8).astype(np_t), _wrap([S], np_t)[0]
    with np.errstate(over="ignore"):
        ref = np.concatenate([i * s, (i + np_t(5)) * s, s - i * s, np.zeros(8, np_t) - i * s])
    # .to(tl.int64) sign-extends a signed type and zero-extends an unsigned one, as astype does
    assert o.cpu().numpy().tolist() == ref.astype(np.int64).tolist()


@triton.jit
def k_issue_25(O32, O8, C8, S):
    i = tl.arange(0, 8)
    tl.store(O32 + i, (i * S).to(tl.int64))
    v = (i + 8).to(tl.int8) * S.to(tl.int8)
    tl.store(O8 + i, v.to(tl.int32))
    tl.store(C8 + i, (v > 0).to(tl.int32))


@pytest.mark.parametrize("S", [2 ** 30, -13])
def test_issue_25_reproducer(S):
    o32 = torch.zeros(8, dtype=torch.int64, device=DEVICE)
    o8, c8 = (torch.zeros(8, dtype=torch.int32, device=DEVICE) for _ in range(2))
    k_issue_25[(1,)](o32, o8, c8, S)
    i = np.arange(8, dtype=np.int32)
    with np.errstate(over="ignore"):
        v = (i + 8).astype(np.int8) * _wrap([S], np.int8)[0]
        assert o32.cpu().tolist() == (i * np.int32(S)).astype(np.int64).tolist()
    assert o8.cpu().tolist() == v.astype(np.int32).tolist()
    assert c8.cpu().tolist() == (v > 0).astype(np.int32).tolist()


@triton.jit
def k_wrapped_offsets(X, O, S):
    i = tl.arange(0, 8)
    # an int8 pointer offset that wraps: addptr sign-extends what is left of it (an i32 offset times a
    # register stride is taken not to wrap, as Triton's analysis takes it: splits.may_wrap)
    off = i.to(tl.int8) * S.to(tl.int8)
    tl.store(O + i, tl.load(X + 128 + off))


def test_a_pointer_offset_that_wraps():
    x = torch.arange(256, dtype=torch.int32)
    o = torch.zeros(8, dtype=torch.int32, device=DEVICE)
    k_wrapped_offsets[(1,)](x.to(DEVICE), o, 40)
    off = (np.arange(8) * 40).astype(np.uint8).astype(np.int8).astype(np.int64)
    assert o.cpu().tolist() == (128 + off).tolist()


@triton.jit
def k_split_and_mask(O, N, C: tl.constexpr, B: tl.constexpr):
    i = tl.arange(0, 8)
    v = i * C  # constant coefficient: an index split by 3 would divide term by term
    tl.store(O + i, v // 3)
    tl.store(O + 8 + i, v % 3)
    w = i + B  # near the int32 limit: a mask bound would take w as never wrapping
    tl.store(O + 16 + i, (w < N).to(tl.int32))


def test_splits_and_masks_of_an_index_that_wraps():
    C, B, N = 3 * 2 ** 29, 2 ** 31 - 4, 100  # C a multiple of 3: the split divides i * C term by term
    o = torch.zeros(24, dtype=torch.int32, device=DEVICE)
    k_split_and_mask[(1,)](o, N, C=C, B=B)
    with np.errstate(over="ignore"):
        v = np.arange(8, dtype=np.int32) * np.int32(C)
        w = np.arange(8, dtype=np.int32) + np.int32(B)
    q = np.trunc(v / 3).astype(np.int32)  # arith.divsi/remsi truncate
    out = o.cpu().numpy()
    assert out[:8].tolist() == q.tolist()
    assert out[8:16].tolist() == (v - 3 * q).tolist()
    assert out[16:].tolist() == (w < N).astype(np.int32).tolist()


@triton.jit
def k_plain_index(X, O, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(O + offs, tl.load(X + offs, mask=m) * 2, mask=m)


def test_a_plain_index_stays_one_dma():
    # pid * BLOCK + arange: the varying part is bounded and the base not known to be near the limit,
    # so the load and store stay descriptors with bounds (no gather, no mask tile)
    x = torch.randn(100)
    o = torch.zeros(100, device=DEVICE)
    h = k_plain_index[(2,)](x.to(DEVICE), o, 100, BLOCK=64)
    torch.testing.assert_close(o.cpu(), x * 2)
    assert not insns(h, "gather", "scatter", "cmpi"), h.asm["spyreasm"]
