"""Index splits over two dimensions (spyre_triton/compiler/splits.py): `(k + C * m + base) // D`, `% D` and
their compositions, as Inductor writes them when it fuses a permute into a matmul's prologue.

Every case checks the integer results bit for bit against torch's truncating division (Triton's `//`
and `%` on signed integers are C's), and the values loaded through them. Where the rule applies (every
term provably >= 0, the divisor's multiples separate), the kernel must have no `gather`: the load is one
DMA with constant strides or offset vectors. Where it does not (negative coefficients, a base of unknown
sign), the cases include elements where floor and truncation differ, so a wrong rewrite would show."""

import pytest
import torch
import triton
import triton.language as tl

from asm_helpers import insns
from conftest import DEVICE

# how the base of the index is made (the matmul templates' `k_idx * BLOCK_K`, program ids, arguments)
LOOP, PID, ARG, ASSUMED, CONST, NEG = range(6)
# the split applied to x
DIV, REM, DIV_REM, PERMUTE, DIV_BIG, DIV_DIV = range(6)


def gathers(kernel, min_n: int = 1) -> list:
    """The gather instructions of at least min_n elements (a gather of one element is a scalar load: an
    index that split down to one address for the whole tile)."""
    return [i for i in insns(kernel, "gather") if i.args["n"] >= min_n]


@triton.jit
def split_kernel(src_ptr, y_ptr, v_ptr, arg, Mv, Kv, BM: tl.constexpr, BK: tl.constexpr, C: tl.constexpr,
                 D: tl.constexpr, R: tl.constexpr, OP: tl.constexpr, BASE: tl.constexpr, NK: tl.constexpr,
                 SHIFT: tl.constexpr, MASK: tl.constexpr, I64: tl.constexpr):
    pid = tl.program_id(0)
    if BASE == 3:
        tl.assume(arg >= 0)
    m = tl.arange(0, BM)[:, None]
    k = tl.arange(0, BK)[None, :]
    for kb in range(0, NK):
        if BASE == 0:
            b0 = kb * BK
        elif BASE == 1:
            b0 = pid * (BM * C) + kb * BK
        elif BASE == 2 or BASE == 3:
            b0 = arg + kb * BK
        elif BASE == 4:
            b0 = 7 + kb * BK
        else:
            b0 = kb * BK - 3
        x = k + C * m + b0
        if I64:
            x = x.to(tl.int64)
        if OP == 0:
            y = x // D
        elif OP == 1:
            y = x % D
        elif OP == 2:
            y = (x // D) % R
        elif OP == 3:
            y = (x % D) * R + (x // D) % R
        elif OP == 4:
            y = x // (D * R)
        else:
            y = (x // D) // R
        off = ((pid * NK + kb) * BM + m) * BK + k
        if MASK:
            mask = (m < Mv) & (k < Kv)
            tl.store(y_ptr + off, y.to(tl.int64), mask)
            tl.store(v_ptr + off, tl.load(src_ptr + (y + SHIFT), mask, other=-1), mask)
        else:
            tl.store(y_ptr + off, y.to(tl.int64))
            tl.store(v_ptr + off, tl.load(src_ptr + (y + SHIFT)))


def tdiv(a, d):
    return torch.div(a, d, rounding_mode="trunc")


def expected(case, arg):
    """x and y of every (program, kb, m, k), in int64, with C's truncating division."""
    BM, BK, C, D, R, OP, BASE, NK, grid = (case[k] for k in ("BM", "BK", "C", "D", "R", "OP", "BASE", "NK", "grid"))
    pid = torch.arange(grid).view(-1, 1, 1, 1)
    kb = torch.arange(NK).view(1, -1, 1, 1)
    m = torch.arange(BM).view(1, 1, -1, 1)
    k = torch.arange(BK).view(1, 1, 1, -1)
    b0 = {LOOP: kb * BK, PID: pid * (BM * C) + kb * BK, ARG: arg + kb * BK, ASSUMED: arg + kb * BK,
          CONST: 7 + kb * BK, NEG: kb * BK - 3}[BASE]
    x = (k + C * m + b0).expand(grid, NK, BM, BK)
    y = {DIV: lambda: tdiv(x, D), REM: lambda: torch.fmod(x, D), DIV_REM: lambda: torch.fmod(tdiv(x, D), R),
         PERMUTE: lambda: torch.fmod(x, D) * R + torch.fmod(tdiv(x, D), R), DIV_BIG: lambda: tdiv(x, D * R),
         DIV_DIV: lambda: tdiv(tdiv(x, D), R)}[OP]()
    return x, y


def floor_y(case, x):
    """y with floor division instead: what a rewrite that forgot truncation would compute."""
    D, R, OP = case["D"], case["R"], case["OP"]
    return {DIV: lambda: x // D, REM: lambda: x % D, DIV_REM: lambda: (x // D) % R,
            PERMUTE: lambda: (x % D) * R + (x // D) % R, DIV_BIG: lambda: x // (D * R),
            DIV_DIV: lambda: (x // D) // R}[OP]()


def case(name, *, BM=16, BK=16, C=64, D=16, R=4, OP=DIV, BASE=LOOP, NK=3, grid=2, arg=0, mask=None, i64=False,
         dma=True, signed=False):
    """dma: the rule applies, so no gather; signed: some x < 0 where floor and truncation differ."""
    return pytest.param(dict(BM=BM, BK=BK, C=C, D=D, R=R, OP=OP, BASE=BASE, NK=NK, grid=grid, arg=arg, mask=mask,
                             i64=i64, dma=dma, signed=signed), id=name)


CASES = [
    # the BERT attention-output prologue: xindex = k + 256 * m, then // 64 % 4, % 64, // 256, // 32768
    case("bert-x10", BM=32, BK=64, C=256, D=64, R=4, OP=DIV_REM, NK=4),
    case("bert-x9", BM=32, BK=64, C=256, D=64, OP=REM, NK=4),
    case("bert-x11", BM=32, BK=64, C=256, D=256, R=128, OP=DIV_REM, NK=4),
    case("bert-x12", BM=32, BK=64, C=256, D=256, R=128, OP=DIV_BIG, NK=4, grid=9),
    case("bert-permute", BM=32, BK=32, C=256, D=64, R=4, OP=PERMUTE, NK=8),
    # the block along k is smaller than the divisor: the base is a multiple of BK only
    case("bk-below-d-div", BK=8, C=64, D=32, OP=DIV, NK=9),
    case("bk-below-d-rem", BK=8, C=64, D=32, OP=REM, NK=9),
    case("bk-below-d-divrem", BK=4, C=48, D=16, R=3, OP=DIV_REM, NK=13),
    # the block along k is larger than the divisor: k itself splits (an offset vector along k)
    case("bk-above-d-div", BK=32, C=64, D=8, OP=DIV),
    case("bk-above-d-rem", BK=32, C=64, D=8, OP=REM),
    case("bk-above-d-nested", BK=32, C=96, D=8, R=3, OP=DIV_DIV),
    # non-powers of two
    case("npot-div", BK=16, C=48, D=6, OP=DIV, NK=5),
    case("npot-rem", BK=16, C=48, D=12, OP=REM, NK=5),
    case("npot-divrem", BK=16, C=60, D=5, R=3, OP=DIV_REM, NK=5),

    case("npot-big", BK=16, C=48, D=3, R=16, OP=DIV_BIG, NK=4, grid=3),
    # bases: program ids, a constant that is not a multiple, an argument with and without tl.assume
    case("pid-base", BM=16, BK=16, C=32, D=64, R=4, OP=DIV_REM, BASE=PID, grid=5),
    case("pid-base-permute", BM=16, BK=16, C=32, D=16, R=2, OP=PERMUTE, BASE=PID, grid=5),
    case("const-base", BK=16, C=64, D=16, R=4, OP=PERMUTE, BASE=CONST),
    case("const-base-div", BK=8, C=64, D=32, OP=DIV, BASE=CONST, NK=4),
    case("assumed-arg", BK=16, C=64, D=16, R=4, OP=DIV_REM, BASE=ASSUMED, arg=37),
    case("assumed-arg-rem", BK=16, C=64, D=16, OP=REM, BASE=ASSUMED, arg=1000),
    case("i64", BM=32, BK=64, C=256, D=64, R=4, OP=PERMUTE, NK=4, i64=True),
    # masks at the tails (descriptor bounds)
    case("masked-tails", BM=32, BK=64, C=256, D=64, R=4, OP=PERMUTE, NK=4, mask=(27, 50)),
    case("masked-npot", BK=16, C=36, D=6, R=3, OP=DIV_REM, NK=5, mask=(11, 13)),
    # no rewrite, and still right: terms that do not separate ((50 m + k) // 12: m and k carry into each
    # other; (8 m + (16 kb + k) // 6) % 3), an argument of unknown sign (here negative), a negative
    # coefficient, a negative base
    case("inseparable-div", BK=16, C=50, D=12, OP=DIV_REM, R=5, NK=4, dma=False),
    case("inseparable-rem", BK=16, C=48, D=6, R=3, OP=DIV_REM, NK=5, mask=(11, 13), dma=False),
    case("arg-unknown-sign", BK=16, C=64, D=16, R=4, OP=DIV_REM, BASE=ARG, arg=-37, dma=False, signed=True),
    case("arg-unknown-sign-rem", BK=16, C=64, D=16, OP=REM, BASE=ARG, arg=-500, dma=False, signed=True),
    case("negative-coef", BK=16, C=-64, D=16, R=4, OP=PERMUTE, NK=2, dma=False, signed=True),
    case("negative-coef-div", BK=16, C=-24, D=64, OP=DIV, NK=2, dma=False, signed=True),
    case("negative-base", BK=16, C=64, D=16, R=4, OP=DIV_REM, BASE=NEG, dma=False, signed=True),
    case("negative-base-rem", BK=16, C=64, D=16, OP=REM, BASE=NEG, dma=False, signed=True),
]


@pytest.mark.parametrize("c", CASES)
def test_index_split(c):
    x, y = expected(c, c["arg"])
    if c["signed"]:  # a case the rule must refuse: truncation and floor differ somewhere in it
        assert (y != floor_y(c, x)).any()
    shift = max(0, -int(y.min()))
    src = torch.arange(int(y.max()) + shift + 1, dtype=torch.int32) * 3 + 1
    shape = (c["grid"], c["NK"], c["BM"], c["BK"])
    y_out = torch.full(shape, -7, dtype=torch.int64, device=DEVICE)
    v_out = torch.full(shape, -7, dtype=torch.int32, device=DEVICE)
    Mv, Kv = c["mask"] or (c["BM"], c["BK"])
    h = split_kernel[(c["grid"],)](src.to(DEVICE), y_out, v_out, c["arg"], Mv, Kv, BM=c["BM"], BK=c["BK"],
                                    C=c["C"], D=c["D"], R=c["R"], OP=c["OP"], BASE=c["BASE"], NK=c["NK"],
                                    SHIFT=shift, MASK=c["mask"] is not None, I64=c["i64"])
    want_y, want_v = y.clone(), src[(y + shift).long()]
    if c["mask"] is not None:
        off = torch.ones(shape, dtype=torch.bool)
        off[:, :, :Mv, :Kv] = False
        want_y[off], want_v[off] = -7, -7
    assert torch.equal(y_out.cpu(), want_y)
    assert torch.equal(v_out.cpu(), want_v)
    if c["dma"]:
        assert not gathers(h, min_n=2), "the split index should be DMA-able (strides, offset vectors)"


@triton.jit
def permuted_a_matmul(a_ptr, w_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, S: tl.constexpr, H: tl.constexpr,
                      DH: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Inductor's addmm template with the attention output's permute ([B, H, S, DH] -> [B*S, H*DH]) fused
    # into A's load (BERT's triton_tem_fused_addmm_clone_t_transpose_view), reduced to its indexing
    K: tl.constexpr = H * DH
    GROUP_M: tl.constexpr = 8
    pid = tl.program_id(0)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_a_m = rm % M
    offs_b_n = rn % N
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        idx_m = offs_a_m[:, None]
        idx_n = offs_k[None, :] + (k_idx * BLOCK_K)
        xindex = idx_n + K * idx_m
        x10 = (xindex // DH) % H
        x11 = (xindex // K) % S
        x12 = xindex // (K * S)
        x9 = xindex % DH
        a = tl.load(a_ptr + (x9 + DH * x11 + DH * S * x10 + DH * S * H * x12))
        b = tl.load(w_ptr + ((offs_k[:, None] + k_idx * BLOCK_K) + K * offs_b_n[None, :]))
        acc += tl.dot(a, b)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + (rn[None, :] + N * rm[:, None]), acc, mask)


@pytest.mark.parametrize("B,H,S,DH,BM,BN,BK", [(2, 4, 16, 8, 16, 16, 8), (2, 4, 16, 8, 16, 16, 16),
                                               (2, 4, 16, 8, 16, 32, 4), (3, 2, 8, 16, 16, 16, 32),
                                               (2, 3, 16, 16, 32, 16, 16)])
def test_permuted_matmul_prologue(B, H, S, DH, BM, BN, BK):
    M, K = B * S, H * DH
    N = K
    x = torch.randn(B, H, S, DH)
    w = torch.randn(N, K)
    c = torch.empty(M, N, device=DEVICE)
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    h = permuted_a_matmul[grid](x.to(DEVICE), w.to(DEVICE), c, M=M, N=N, S=S, H=H, DH=DH, BLOCK_M=BM, BLOCK_N=BN,
                                BLOCK_K=BK)
    torch.testing.assert_close(c.cpu(), x.permute(0, 2, 1, 3).reshape(M, K) @ w.t(), rtol=1e-4, atol=1e-4)
    assert not gathers(h)
    loads = insns(h, "ld")
    assert len(loads) == 2, loads


@triton.jit
def runtime_loop_kernel(src_ptr, y_ptr, v_ptr, K, BM: tl.constexpr, BK: tl.constexpr, C: tl.constexpr,
                        D: tl.constexpr):
    # a user kernel's K loop: the bound is an argument, the base a multiple of BK from the step
    m = tl.arange(0, BM)[:, None]
    k = tl.arange(0, BK)[None, :]
    for kb in range(0, K, BK):
        x = k + C * m + kb
        y = (x % D) * 1000 + x // D
        off = (kb // BK * BM + m) * BK + k
        tl.store(y_ptr + off, y)
        tl.store(v_ptr + off, tl.load(src_ptr + y))


@pytest.mark.parametrize("K,BK,C,D", [(80, 16, 64, 32), (48, 8, 96, 24), (64, 32, 64, 16)])
def test_runtime_loop_bound(K, BK, C, D):
    BM = 8
    kb = torch.arange(0, K, BK).view(-1, 1, 1)
    x = torch.arange(BK).view(1, 1, -1) + C * torch.arange(BM).view(1, -1, 1) + kb
    y = (x % D) * 1000 + x // D
    src = torch.arange(int(y.max()) + 1, dtype=torch.int32) * 7
    y_out = torch.empty(y.shape, dtype=torch.int32, device=DEVICE)
    v_out = torch.empty(y.shape, dtype=torch.int32, device=DEVICE)
    h = runtime_loop_kernel[(1,)](src.to(DEVICE), y_out, v_out, K, BM=BM, BK=BK, C=C, D=D)
    assert torch.equal(y_out.cpu(), y.int())
    assert torch.equal(v_out.cpu(), src[y])
    assert not gathers(h)


@triton.jit
def assume_scope_kernel(y_ptr, arg, BM: tl.constexpr, BK: tl.constexpr):
    # tl.assume under a branch that is not taken must not make arg >= 0 elsewhere
    if arg > 100:
        tl.assume(arg >= 0)
    m = tl.arange(0, BM)[:, None]
    k = tl.arange(0, BK)[None, :]
    x = k + 64 * m + arg
    tl.store(y_ptr + m * BK + k, (x // 16) * 100 + x % 16)


def test_assume_holds_only_where_it_is():
    BM, BK, arg = 4, 16, -37
    x = torch.arange(BK).view(1, -1) + 64 * torch.arange(BM).view(-1, 1) + arg
    y = torch.empty(BM, BK, dtype=torch.int32, device=DEVICE)
    assume_scope_kernel[(1,)](y, arg, BM=BM, BK=BK)
    assert torch.equal(y.cpu(), (tdiv(x, 16) * 100 + torch.fmod(x, 16)).int())


@triton.jit
def gqa_key_transpose(in_ptr0, out_ptr0, ynumel, xnumel, YBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    # Inductor's tiled kernel for a decode step's `key.transpose(-2, -1)` of a GQA KV cache (2 KV heads
    # repeated 4 times, 64 wide, 25 positions) times the attention scale, as emitted for spyre
    ynumel = 512
    xnumel = 25
    yoffset = tl.program_id(1) * YBLOCK
    yindex = yoffset + tl.arange(0, YBLOCK)[:, None]
    ymask = yindex < ynumel
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[None, :]
    xmask = xindex < xnumel
    y0 = yindex % 64
    y1 = yindex // 64
    tmp0 = tl.load(in_ptr0 + (y0 + 64 * xindex + 1600 * (y1 // 4)), xmask & ymask)
    tl.store(out_ptr0 + (xindex + 25 * yindex), tmp0 * 0.3535533905932738, xmask & ymask)


@pytest.mark.parametrize("YB, XB", [(64, 32), (32, 16), (128, 8)])
def test_tiled_gqa_transpose_is_one_dma(YB, XB):
    """Tiled (spyre's Inductor prefers N-D tiles for pointwise kernels), the index splits per tile
    dimension: the row index's `% 64` and `// 64 // 4` are scalars, or one offset vector along the
    rows when a tile spans two heads (YB = 128); the load is one DMA and nothing is divided per
    element of the tile. Flat, the same copy computed `xindex // 25`, `% 64`, `// 1600` per element
    and gathered."""
    src = torch.randn(2 * 25 * 64, device=DEVICE)
    out = torch.empty(8 * 64 * 25, device=DEVICE)
    k = gqa_key_transpose[(triton.cdiv(25, XB), triton.cdiv(512, YB))](src, out, 512, 25, YBLOCK=YB, XBLOCK=XB)
    ref = src.cpu().view(2, 25, 64).transpose(1, 2).unsqueeze(1).expand(2, 4, 64, 25).reshape(-1) * 0.3535533905932738
    torch.testing.assert_close(out.cpu(), ref)
    assert not gathers(k)
    assert all(i.args["n"] <= YB for i in insns(k, "divs", "rems")), "a division per element of the tile"
