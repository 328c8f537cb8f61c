"""A flat index split by `%` and `//` into the dimensions of a permute (spyre_triton/compiler/splits.py
Tile.pattern, ops.dma_desc, compiler/dead.py).

Inductor writes a permuted copy (attention's head split, `x.permute(...).contiguous()`) as a pointwise
kernel over a flat index: `x0 = xindex % 64`, `x1 = (xindex // 64) % 128`, loaded from
`x0 + 256 * x1 + ...`. Over a block of XBLOCK elements, `i % 64` and `i // 64` split the block's one
dimension into [XBLOCK / 64, 64]; the load and the store then read and write two strided dimensions
instead of going through an offset vector per element, and the instructions that computed the vectors
are dropped. Every case compares with torch; where the split applies, the kernel must have no offset
vector in a descriptor and no integer division over a tile. Where it does not (a mask on the split
dimension, a divisor that does not divide the block) the results must still be right."""
import math

import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import in_lx, insns, offset_vector_descs, program
from conftest import DEVICE


@triton.jit
def split_heads(bias_ptr, x_ptr, out_ptr, xnumel, XBLOCK: tl.constexpr, MASKED: tl.constexpr):
    # Inductor's BERT kernel: out[b, h, s, d] = (x[b, s, h * 64 + d] + bias[h * 64 + d]) * scale,
    # for x of [8, 128, 256] (4 heads of 64)
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    if MASKED:
        xmask = xindex < xnumel
    else:
        xmask = tl.full([XBLOCK], True, tl.int1)
    x0 = xindex % 64
    x2 = (xindex // 8192) % 4
    x1 = (xindex // 64) % 128
    x3 = xindex // 32768
    tmp0 = tl.load(bias_ptr + (x0 + 64 * x2), xmask)
    tmp1 = tl.load(x_ptr + (x0 + 64 * x2 + 256 * x1 + 32768 * x3), xmask)
    tl.store(out_ptr + xindex, (tmp0 + tmp1) * 0.125, xmask)


@triton.jit
def merge_heads(x_ptr, out_ptr, XBLOCK: tl.constexpr):
    # the inverse, written through the store: out[b, s, h * 64 + d] = x[b, h, s, d]
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    d = xindex % 64
    s = (xindex // 64) % 128
    h = (xindex // 8192) % 4
    b = xindex // 32768
    v = tl.load(x_ptr + xindex)
    tl.store(out_ptr + (d + 64 * h + 256 * s + 32768 * b), v)


@triton.jit
def rows_and_columns(x_ptr, out_ptr, D: tl.constexpr, XBLOCK: tl.constexpr, R: tl.constexpr):
    # a 2-D block: the split dimension is the rows of [XBLOCK, R]; out[(i % D) * R + r, i // D] = x[i, r]
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r = tl.arange(0, R)[None, :]
    v = tl.load(x_ptr + xindex * R + r)
    tl.store(out_ptr + ((xindex % D) * R + r) * (4096 // D) + xindex // D, v)


def descs_and_tile_divisions(kernel):
    """The descriptors with an offset vector, and the divisions, remainders and iotas into LX tiles:
    what a split that is not read as strided dimensions costs."""
    prog = program(kernel)
    divisions = [i for i in insns(kernel, "divs", "rems", "iota") if in_lx(prog, i.args["a"])]
    return offset_vector_descs(kernel), divisions


def bert_inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(256, generator=g), torch.randn(8, 128, 256, generator=g)


def split_heads_ref(bias, x):
    return ((x + bias) * 0.125).view(8, 128, 4, 64).permute(0, 2, 1, 3).contiguous()


@pytest.mark.parametrize("XBLOCK", [128, 512, 1024, 4096])
def test_split_heads_reads_two_strided_dimensions(XBLOCK):
    bias, x = bert_inputs()
    out = torch.empty(8, 4, 128, 64, device=DEVICE)
    n = out.numel()
    h = split_heads[(n // XBLOCK,)](bias.to(DEVICE), x.to(DEVICE), out, n, XBLOCK=XBLOCK, MASKED=False)
    torch.testing.assert_close(out.cpu(), split_heads_ref(bias, x), atol=0, rtol=0)
    vectors, divisions = descs_and_tile_divisions(h)
    assert not vectors and not divisions, (vectors, divisions)
    assert any(tuple(d.shape) == (XBLOCK // 64, 64) and tuple(d.strides) == (1024, 4) for d in program(h).descs)


@pytest.mark.parametrize("XBLOCK", [64, 1024])
def test_split_heads_with_a_mask_on_the_split_dimension(XBLOCK):
    # xnumel is not a multiple of the block: the last block is clipped, the offset vectors stay
    bias, x = bert_inputs()
    out = torch.full((8 * 4 * 128 * 64,), -1.0, device=DEVICE)
    n = out.numel() - 100
    split_heads[(triton.cdiv(n, XBLOCK),)](bias.to(DEVICE), x.to(DEVICE), out, n, XBLOCK=XBLOCK, MASKED=True)
    want = split_heads_ref(bias, x).flatten()
    want[n:] = -1.0
    torch.testing.assert_close(out.cpu(), want, atol=0, rtol=0)


@pytest.mark.parametrize("XBLOCK", [256, 1024])
def test_merge_heads_writes_two_strided_dimensions(XBLOCK):
    x = torch.randn(8, 4, 128, 64, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(8, 128, 256, device=DEVICE)
    h = merge_heads[(x.numel() // XBLOCK,)](x.to(DEVICE), out, XBLOCK=XBLOCK)
    torch.testing.assert_close(out.cpu(), x.permute(0, 2, 1, 3).reshape(8, 128, 256), atol=0, rtol=0)
    vectors, divisions = descs_and_tile_divisions(h)
    assert not vectors and not divisions, (vectors, divisions)


@pytest.mark.parametrize("D, XBLOCK, split", [(16, 64, True), (8, 128, True), (48, 128, False), (64, 64, False)])
def test_rows_of_a_2d_block(D, XBLOCK, split):
    # D = 48 does not divide the 128-row block, and with D = XBLOCK `% D` changes nothing in a block:
    # neither splits, both stay right
    R, step = 4, math.lcm(D, XBLOCK)
    x = torch.randn(4096 // step * step, R, generator=torch.Generator().manual_seed(D))
    out = torch.zeros(D * R * (4096 // D), device=DEVICE)
    h = rows_and_columns[(x.shape[0] // XBLOCK,)](x.to(DEVICE), out, D=D, XBLOCK=XBLOCK, R=R)
    i = torch.arange(x.shape[0])[:, None]
    r = torch.arange(R)[None, :]
    want = torch.zeros_like(out.cpu())
    want[(((i % D) * R + r) * (4096 // D) + i // D).flatten()] = x.flatten()
    torch.testing.assert_close(out.cpu(), want, atol=0, rtol=0)
    if split:
        vectors, divisions = descs_and_tile_divisions(h)
        assert not vectors and not divisions, (vectors, divisions)


def test_permute_through_inductor():
    torch._dynamo.reset()
    x = torch.randn(8, 128, 256)
    f = torch.compile(lambda t: (t + 1).view(8, 128, 4, 64).permute(0, 2, 1, 3).contiguous() * 0.5)
    torch.testing.assert_close(f(x.to(DEVICE)).cpu(), f(x), atol=0, rtol=0)
