"""Index-bound masks reach the DMA engine as descriptor bounds; every other mask is a mask tile."""
import pytest
import torch
import triton
import triton.language as tl

from spyre_triton import _runtime as rt
from spyre_triton import isa

from asm_helpers import ArgSpec, Program, insns, parse_asm, program
from conftest import DEVICE


@triton.jit
def masked_copy_2d(src, dst, M, N, stride, FORM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    if FORM == "lt":
        mask = (rm[:, None] < M) & (rn[None, :] < N)
    elif FORM == "le":
        mask = (rm[:, None] <= M - 1) & (rn[None, :] <= N - 1)
    elif FORM == "gt":
        mask = (M > rm[:, None]) & (N > rn[None, :])
    else:  # not an index bound: the parity of the column
        mask = (rm[:, None] < M) & (rn[None, :] < N) & (rn[None, :] % 2 == 0)
    x = tl.load(src + rm[:, None] * stride + rn[None, :], mask=mask, other=-7.0)
    tl.store(dst + rm[:, None] * stride + rn[None, :], x + 1, mask=mask)


@pytest.mark.parametrize("form", ["lt", "le", "gt", "parity"])
@pytest.mark.parametrize("shape", [(37, 50), (16, 32), (1, 1)])
def test_masked_2d_exactly_sized_tensors(form, shape):
    M, N = shape
    x = torch.randn(M, N)
    out = torch.full((M, N), 5.0)
    src, dst = x.to(DEVICE), out.to(DEVICE)
    # a grid larger than needed: programs entirely out of bounds must touch nothing
    masked_copy_2d[(triton.cdiv(M, 16) + 1, triton.cdiv(N, 32) + 1)](src, dst, M, N, N, FORM=form, BM=16, BN=32)
    ref = x + 1
    if form == "parity":
        ref[:, 1::2] = 5.0
    torch.testing.assert_close(dst.cpu(), ref)
    asm = masked_copy_2d.warmup(src, dst, M, N, N, FORM=form, BM=16, BN=32, grid=(1,)).asm["spyreasm"]
    bounded = [d for d in program(asm).descs if d.limits]
    if form == "parity":  # a mask tile, as it must be; its index-bound part is one bmask over the bounds
        assert len(bounded) == 1 and len(insns(asm, "bmask")) == 1
    else:
        assert len(bounded) == 2 and not insns(asm, "cmpi")  # no mask tile computed at all


@triton.jit
def fill_outside(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n, other=3.5))


@pytest.mark.parametrize("n", [0, 1, 5, 64, -3])
def test_other_fills_outside_the_bounds(n):
    x = torch.arange(64, dtype=torch.float32)
    out = torch.empty(64, device=DEVICE)
    fill_outside[(1,)](x.to(DEVICE), out, n, BLOCK=64)
    ref = torch.where(torch.arange(64) < n, x, torch.tensor(3.5))
    torch.testing.assert_close(out.cpu(), ref)


def test_bounds_in_assembly_round_trip():
    p = Program("k", n_sregs=4, lx_bytes=4096)
    p.descs = [isa.Descriptor((8, 16), (("s", 8), 4), (("s", 16), None))]
    p.insns = [isa.Insn("ld", "f32", args={"a": 32, "b": 0, "c": 0}), isa.Insn("halt")]
    asm = p.to_asm()
    assert ".desc [8, 16] [s1, 4] < [s2, _]" in asm
    assert parse_asm(asm).to_asm() == asm
    assert Program.decode(p.encode()).to_asm() == asm


def test_bounds_and_mask_in_one_instruction_is_refused():
    p = Program("k", n_sregs=4, lx_bytes=4096)
    p.args = [ArgSpec("x", "ptr", "f32", 0)]
    p.descs = [isa.Descriptor((8,), (4,), (("s", 16),))]
    p.insns = [isa.Insn("ld", "f32", args={"a": 64, "b": 0, "c": 0, "d": 40, "e": isa.NONE}), isa.Insn("halt")]
    with pytest.raises(ValueError, match="bounds takes no mask"):
        rt.Kernel(p.encode())


@triton.jit
def bound_values(out, flags, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # an index-bound mask used as values: a where over it is one bsel over the descriptor's bounds,
    # the mask itself (here cast to i8) one bmask
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    m = (rm[:, None] < M) & (rn[None, :] <= N)
    tl.store(out + rm[:, None] * BN + rn[None, :], tl.where(m, 1.5, -2.0))
    tl.store(flags + rm[:, None] * BN + rn[None, :], m.to(tl.int8))


@pytest.mark.parametrize("M,N", [(5, 7), (0, 3), (-4, 2), (100, 100), (16, -1), (3, 0)])
def test_bounds_as_values(M, N):
    out = torch.empty(16, 32, device=DEVICE)
    flags = torch.empty(16, 32, dtype=torch.int8, device=DEVICE)
    h = bound_values[(1,)](out, flags, M, N, BM=16, BN=32)
    m = (torch.arange(16)[:, None] < M) & (torch.arange(32)[None, :] <= N)
    torch.testing.assert_close(out.cpu(), torch.where(m, 1.5, -2.0))
    torch.testing.assert_close(flags.cpu(), m.to(torch.int8))
    ops = {i.op for i in insns(h)}
    assert "bsel" in ops and "bmask" in ops and "cmpi" not in ops and "select" not in ops, ops


@triton.jit
def bound_select(out, x, y, M, N, BM: tl.constexpr, BN: tl.constexpr, SPLAT_X: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    offs = rm[:, None] * BN + rn[None, :]
    a = tl.load(x + offs)
    if SPLAT_X:
        a = 3.0
    tl.store(out + offs, tl.where((rm[:, None] < M) & (rn[None, :] < N), a, tl.load(y + offs)))


@pytest.mark.parametrize("splat", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.float64], ids=str)
@pytest.mark.parametrize("M,N", [(3, 5), (8, 16), (0, 16), (8, 0), (9, 17)])
def test_select_by_bounds(M, N, dtype, splat):
    x = (torch.arange(128) % 50).to(dtype).view(8, 16)
    y = (-torch.arange(128) % 30).to(dtype).view(8, 16)
    out = torch.empty(8, 16, dtype=dtype, device=DEVICE)
    h = bound_select[(1,)](out, x.to(DEVICE), y.to(DEVICE), M, N, BM=8, BN=16, SPLAT_X=splat)
    m = (torch.arange(8)[:, None] < M) & (torch.arange(16)[None, :] < N)
    torch.testing.assert_close(out.cpu(), torch.where(m, torch.full_like(x, 3) if splat else x, y))
    assert insns(h, "bsel")


@triton.jit
def bound_select_3d(out, x, A, B, C, BA: tl.constexpr, BB: tl.constexpr, BC: tl.constexpr):
    ia = tl.arange(0, BA)[:, None, None]
    ib = tl.arange(0, BB)[None, :, None]
    ic = tl.arange(0, BC)[None, None, :]
    offs = ia * BB * BC + ib * BC + ic
    v = tl.load(x + offs) * 2.0  # a fresh tile only the where reads: the bsel runs in place
    tl.store(out + offs, tl.where((ia < A) & (ib < B) & (ic < C), v, -1.0))


@pytest.mark.parametrize("A,B,C", [(4, 4, 8), (2, 3, 5), (0, 4, 8), (4, 0, 8), (4, 4, 0), (1, 1, 1), (9, 9, 9)])
def test_select_by_bounds_in_place_3d(A, B, C):
    x = torch.randn(4, 4, 8)
    out = torch.empty(4, 4, 8, device=DEVICE)
    h = bound_select_3d[(1,)](out, x.to(DEVICE), A, B, C, BA=4, BB=4, BC=8)
    m = (torch.arange(4)[:, None, None] < A) & (torch.arange(4)[None, :, None] < B) & (torch.arange(8)[None, None, :] < C)
    torch.testing.assert_close(out.cpu(), torch.where(m, x * 2, torch.tensor(-1.0)))
    bsel = insns(h, "bsel")[0]
    view = isa.VIEW
    # in place: the destination is the selected-from operand (the same LX offset, or the same view)
    assert (bsel.args["a"], bsel.flags.get(view["a"].name, 0)) == (bsel.args["c"], bsel.flags.get(view["c"].name, 0)), bsel
