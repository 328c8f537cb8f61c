"""Offset vectors: a tensor of pointers that is strided in one dimension and irregular in another
(embedding rows, a matmul's `offs % M` rows, Inductor's `x // n` / `x % n` index splits) is one DMA
whose descriptor carries a per-index byte-offset table for the irregular dimension. These tests pin
the results against torch over the edge cases of that path (wrap-around, tails, masks, negative
offsets, every element size, stores, faults) and check that the compiler really takes it."""

import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import _runtime
from spyre_triton import isa

from asm_helpers import Program, insns, offset_vector_descs, parse_asm
from conftest import DEVICE


@triton.jit
def rows_kernel(idx_ptr, w_ptr, out_ptr, T, D, BT: tl.constexpr, BD: tl.constexpr):
    toks = tl.program_id(0) * BT + tl.arange(0, BT)
    tmask = toks < T
    idx = tl.load(idx_ptr + toks, mask=tmask, other=0)
    for d in range(0, D, BD):
        cols = d + tl.arange(0, BD)
        m = tmask[:, None] & (cols[None, :] < D)
        rows = tl.load(w_ptr + idx[:, None] * D + cols[None, :], mask=m, other=-1)
        tl.store(out_ptr + toks[:, None] * D + cols[None, :], rows, mask=m)


DTYPES = [torch.int8, torch.float16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("T,D,BT,BD", [(37, 19, 16, 8), (64, 64, 64, 64), (1, 5, 4, 8), (0, 8, 4, 8)])
def test_embedding_rows(dtype, T, D, BT, BD):
    V = 23
    w = (torch.arange(V * D) % 120).to(dtype).view(V, D)
    idx = torch.randint(0, V, (max(T, 1),), dtype=torch.int32)[:T]
    out = torch.full((T, D), 7, dtype=dtype)
    od = out.to(DEVICE)
    h = rows_kernel[(max(triton.cdiv(T, BT), 1),)](idx.to(DEVICE), w.to(DEVICE), od, T, D, BT=BT, BD=BD)
    torch.testing.assert_close(od.cpu(), w[idx.long()] if T else out)
    assert not insns(h, "gather") and offset_vector_descs(h), "the row gather should be one DMA with an offset vector"


def test_row_index_out_of_range_is_a_device_error_and_the_device_lives_on():
    V, D = 8, 16
    w = torch.randn(V, D, device=DEVICE)
    idx = torch.tensor([0, 3, V + 50, 1], dtype=torch.int32, device=DEVICE)
    out = torch.zeros(4, D, device=DEVICE)
    with pytest.raises(_runtime.DeviceError) as e:
        rows_kernel[(1,)](idx, w, out, 4, D, BT=4, BD=16)
    msg = str(e.value)
    assert "out-of-bounds load" in msg and "rows_kernel" in msg and "tl.load(w_ptr" in msg
    idx = torch.tensor([0, 3, 7, 1], dtype=torch.int32, device=DEVICE)
    rows_kernel[(1,)](idx, w, out, 4, D, BT=4, BD=16)
    torch.testing.assert_close(out.cpu(), w.cpu()[[0, 3, 7, 1]])


def test_negative_row_offsets_and_rows_in_any_order():
    V, D = 16, 8
    w = torch.randn(V, D)
    idx = torch.tensor([15, 0, 7, 7, 3, 15, 1, 2], dtype=torch.int32)
    out = torch.empty(8, D, device=DEVICE)
    # the base pointer points at the last row: every offset is negative or zero
    base = w.to(DEVICE)[V - 1:]
    rows_kernel[(1,)]((idx - (V - 1)).to(DEVICE), base, out, 8, D, BT=8, BD=8)
    torch.testing.assert_close(out.cpu(), w[idx.long()])


@triton.jit
def masked_rows_kernel(idx_ptr, w_ptr, out_ptr, D: tl.constexpr, BT: tl.constexpr):
    # a mask that is not an index bound (a mask tile), over rows whose masked-off indices are garbage
    t = tl.arange(0, BT)
    idx = tl.load(idx_ptr + t)
    cols = tl.arange(0, D)
    keep = (t[:, None] % 2 == 0) & (cols[None, :] < D)
    rows = tl.load(w_ptr + idx[:, None] * D + cols[None, :], mask=keep, other=0.5)
    tl.store(out_ptr + t[:, None] * D + cols[None, :], rows)


def test_masked_off_rows_are_never_touched():
    V, D, BT = 10, 8, 8
    w = torch.randn(V, D)
    idx = torch.tensor([1, 10**6, 2, -10**6, 9, 10**7, 0, 123456], dtype=torch.int32)
    out = torch.empty(BT, D, device=DEVICE)
    masked_rows_kernel[(1,)](idx.to(DEVICE), w.to(DEVICE), out, D=D, BT=BT)
    ref = torch.full((BT, D), 0.5)
    ref[0::2] = w[idx[0::2].long()]
    torch.testing.assert_close(out.cpu(), ref)


@triton.jit
def scatter_rows_kernel(idx_ptr, src_ptr, out_ptr, T, D, BT: tl.constexpr, BD: tl.constexpr):
    toks = tl.arange(0, BT)
    cols = tl.arange(0, BD)
    idx = tl.load(idx_ptr + toks, mask=toks < T, other=0)
    m = (toks[:, None] < T) & (cols[None, :] < D)
    x = tl.load(src_ptr + toks[:, None] * D + cols[None, :], mask=m)
    tl.store(out_ptr + idx[:, None] * D + cols[None, :], x, mask=m)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_store_through_row_offsets(dtype):
    T, D, V = 6, 5, 12
    src = (torch.arange(T * D) % 100).to(dtype).view(T, D)
    idx = torch.tensor([11, 0, 4, 7, 2, 9], dtype=torch.int32)
    out = torch.zeros(V, D, dtype=dtype)
    od = out.to(DEVICE)
    h = scatter_rows_kernel[(1,)](idx.to(DEVICE), src.to(DEVICE), od, T, D, BT=8, BD=8)
    out[idx.long()] = src
    torch.testing.assert_close(od.cpu(), out)
    assert not insns(h, "scatter") and offset_vector_descs(h)


@triton.jit
def wrapped_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Triton tutorial 03's addressing: rows and columns wrap with `% M` / `% N`
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_bn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_cm[:, None] * N + offs_cn[None, :], acc, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (50, 70, 40), (5, 3, 17), (33, 16, 16), (100, 1, 8)])
def test_matmul_rows_that_wrap(M, N, K):
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.empty(M, N, device=DEVICE)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    h = wrapped_matmul[grid](a.to(DEVICE), b.to(DEVICE), c, M, N, K, BM=32, BN=32, BK=16)
    torch.testing.assert_close(c.cpu(), a @ b, rtol=1e-4, atol=1e-4)
    assert not insns(h, "gather") and offset_vector_descs(h)


@triton.jit
def index_split_kernel(in_ptr, out_ptr, xnumel, rnumel, S0: tl.constexpr, XBLOCK: tl.constexpr,
                       RBLOCK: tl.constexpr):
    # the shape of an Inductor reduction over a permuted input: x splits into (x // S0, x % S0)
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    x0 = xindex % S0
    x1 = xindex // S0
    rindex = tl.arange(0, RBLOCK)[None, :]
    rmask = rindex < rnumel
    v = tl.load(in_ptr + (x0 + S0 * rindex + S0 * rnumel * x1), xmask & rmask, other=0.0)
    tl.store(out_ptr + xindex, tl.sum(v, 1)[:, None], xmask)


@pytest.mark.parametrize("B,R,S0,XBLOCK", [(3, 5, 7, 8), (4, 16, 4, 16), (2, 9, 3, 64)])
def test_inductor_index_split(B, R, S0, XBLOCK):
    x = torch.randn(B, R, S0)
    out = torch.empty(B * S0, device=DEVICE)
    h = index_split_kernel[(triton.cdiv(B * S0, XBLOCK),)](x.to(DEVICE), out, B * S0, R, S0=S0, XBLOCK=XBLOCK,
                                                            RBLOCK=16)
    torch.testing.assert_close(out.cpu(), x.sum(1).reshape(-1))
    assert not insns(h, "gather") and offset_vector_descs(h)


def test_offset_vectors_round_trip_through_assembly_and_binary():
    d = isa.Descriptor((4, 8), (("v", 64), 4), (None, ("s", 16)))
    assert isa.Descriptor.decode(d.encode()) == d
    prog = Program("k", lx_bytes=256, n_sregs=4)
    prog.descs.append(d)
    prog.insns.append(isa.Insn("halt", "i32", "i1", {}, {}, -1))
    again = parse_asm(prog.to_asm())
    assert again.descs == [d]
    assert Program.decode(prog.encode()).descs == [d]


@pytest.mark.parametrize("slot,what", [(10**6, "outside the arena"), (36, "not 8-byte aligned")])
def test_a_bad_offset_vector_is_rejected_at_load(slot, what):
    prog = Program("k", lx_bytes=256, n_sregs=4)
    prog.descs.append(isa.Descriptor((4, 8), (("v", slot), 4)))
    prog.insns.append(isa.Insn("halt", "i32", "i1", {}, {}, -1))
    with pytest.raises(Exception, match=what):
        _runtime.Kernel(prog.encode())
