"""tl.dot_scaled on spyre against a PyTorch reference on the CPU.

The reference follows Triton's semantics (DecomposeScaledBlocked): the operands are upcast exactly to
the compute type (fp16 if either operand is fp16, else bf16), multiplied by their e8m0 scales
(2^(s-127), 0xFF NaN unless fast_math) in that type, and multiplied with f32 accumulation.

- the upcast and scaling are checked bit for bit: a product with an identity matrix returns them;
- every pair of formats, packing along M/N, batches, nvfp4 (e4m3 scales) and accumulation in a
  loop are checked against torch.matmul with a tight tolerance (only the summation order differs);
- what cannot be compiled raises a CompilationError that names it.

Lowering: spyre_triton/compiler/ops_scaled_dot.py.
"""
import os
import tempfile

import pytest
import torch
import triton
import triton.language as tl

from spyre_triton.compiler.errors import CompilationError

from conftest import DEVICE
FORMATS = ["e2m1", "e4m3", "e5m2", "bf16", "fp16"]
MX = ["e2m1", "e4m3", "e5m2"]
TORCH_FP = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "fp16": torch.float16}
E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def dev(t):
    return None if t is None else t.to(DEVICE)


# -- the kernel ------------------------------------------------------------------------------------
@triton.jit
def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr,
                      K: tl.constexpr, TA: tl.constexpr, TB: tl.constexpr, A_PACK_K: tl.constexpr,
                      B_PACK_K: tl.constexpr, GA: tl.constexpr, GB: tl.constexpr, FAST: tl.constexpr,
                      HAS_C: tl.constexpr, K_STEPS: tl.constexpr):
    """o = c + sum over K_STEPS blocks of dot_scaled(a block, b block); a is [M, K_STEPS*K] (in
    elements) and b [K_STEPS*K, N], both stored dense and packed as their formats say."""
    AM: tl.constexpr = M // 2 if TA == "e2m1" and not A_PACK_K else M
    AK: tl.constexpr = K // 2 if TA == "e2m1" and A_PACK_K else K
    BK: tl.constexpr = K // 2 if TB == "e2m1" and B_PACK_K else K
    BN: tl.constexpr = N // 2 if TB == "e2m1" and not B_PACK_K else N
    a_ptrs = a_ptr + tl.arange(0, AM)[:, None] * (AK * K_STEPS) + tl.arange(0, AK)[None, :]
    b_ptrs = b_ptr + tl.arange(0, BK)[:, None] * BN + tl.arange(0, BN)[None, :]
    out_offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    if HAS_C:
        acc = tl.load(c_ptr + out_offs)
    else:
        acc = tl.zeros((M, N), tl.float32)
    for step in range(K_STEPS):
        a = tl.load(a_ptrs + step * AK)
        b = tl.load(b_ptrs + step * BK * BN)
        if sa_ptr is not None:
            sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * (K // GA * K_STEPS) + step * (K // GA)
                         + tl.arange(0, K // GA)[None, :])
        else:
            sa = None
        if sb_ptr is not None:
            sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * (K // GB * K_STEPS) + step * (K // GB)
                         + tl.arange(0, K // GB)[None, :])
        else:
            sb = None
        acc = tl.dot_scaled(a, sa, TA, b, sb, TB, acc, fast_math=FAST, lhs_k_pack=A_PACK_K, rhs_k_pack=B_PACK_K)
    tl.store(o_ptr + out_offs, acc)


@triton.jit
def batched_kernel(a_ptr, sa_ptr, b_ptr, o_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                   K: tl.constexpr, TA: tl.constexpr, TB: tl.constexpr):
    AK: tl.constexpr = K // 2 if TA == "e2m1" else K
    bi = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + bi * (M * AK) + tl.arange(0, M)[None, :, None] * AK + tl.arange(0, AK)[None, None, :])
    sa = tl.load(sa_ptr + bi * (M * (K // 32)) + tl.arange(0, M)[None, :, None] * (K // 32)
                 + tl.arange(0, K // 32)[None, None, :])
    b = tl.load(b_ptr + bi * (K * N) + tl.arange(0, K)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    o = tl.dot_scaled(a, sa, TA, b, None, TB)
    tl.store(o_ptr + bi * (M * N) + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :], o)


# -- the reference -----------------------------------------------------------------------------------
def compute_type(fa, fb):
    return torch.float16 if "fp16" in (fa, fb) else torch.bfloat16


def unpack_e2m1(packed, dim):
    """uint8 [.., P, ..] -> float32 [.., 2P, ..] along dim; the low nibble is the even element."""
    def values(nib):
        v = E2M1_VALUES[(nib & 7).long()]
        return torch.where((nib & 8) != 0, -v, v)
    dim %= packed.dim()
    pair = torch.stack([values(packed & 0xF), values(packed >> 4)], dim + 1)
    shape = list(packed.shape)
    shape[dim] *= 2
    return pair.reshape(shape)


def upcast(raw, fmt, ct, pack_dim):
    if fmt == "e2m1":
        return unpack_e2m1(raw, pack_dim).to(ct)
    return raw.view(TORCH_FP[fmt]).to(ct)


def scale_values(s, ct, fast):
    if s.dtype == torch.float8_e4m3fn:
        return s.to(ct)
    if ct == torch.bfloat16:
        v = (s.to(torch.int16) << 7).view(torch.bfloat16)
    else:
        v = (s.to(torch.int32) << 23).view(torch.float32).to(torch.float16)
    return v if fast else torch.where(s == 255, torch.full_like(v, float("nan")), v)


def scaled(raw, s, fmt, ct, pack_dim, is_lhs, fast):
    v = upcast(raw, fmt, ct, pack_dim)
    if s is None:
        return v
    k = v.shape[-1] if is_lhs else v.shape[-2]
    full = scale_values(s, ct, fast).repeat_interleave(k // s.shape[-1], dim=-1)
    return v * (full if is_lhs else full.transpose(-1, -2))


def reference(a, sa, fa, b, sb, fb, c=None, a_pack_k=True, b_pack_k=True, fast=False):
    ct = compute_type(fa, fb)
    x = scaled(a, sa, fa, ct, -1 if a_pack_k else -2, True, fast)
    y = scaled(b, sb, fb, ct, -2 if b_pack_k else -1, False, fast)
    out = x.float() @ y.float()
    return out if c is None else out + c


# -- inputs ----------------------------------------------------------------------------------------
def operand(fmt, rows, cols, gen, every_byte=False):
    """Raw operand data of [rows, cols] elements in fmt (e2m1 is passed packed by the caller), finite
    (so that one special value does not turn whole sums into NaN; test_non_finite has those)."""
    if fmt in ("bf16", "fp16"):
        return torch.randn(rows, cols, generator=gen).to(TORCH_FP[fmt])
    raw = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, generator=gen)
    if every_byte:
        raw.view(-1)[:256] = torch.arange(256, dtype=torch.uint8)
    if fmt != "e2m1":  # no inf/NaN encodings
        mask = 0x7F if fmt == "e4m3" else 0x7C
        raw = torch.where(raw & mask == mask, raw & 0x83, raw)
    return raw


def packed_shape(fmt, rows, cols, pack_dim):
    if fmt != "e2m1":
        return rows, cols
    return (rows // 2, cols) if pack_dim == 0 else (rows, cols // 2)


def scales(rows, groups, gen, ct, lo=None, hi=None):
    if lo is None:
        lo, hi = (120, 134) if ct == torch.bfloat16 else (124, 131)
    return torch.randint(lo, hi + 1, (rows, groups), dtype=torch.uint8, generator=gen)


def run(a, sa, fa, b, sb, fb, M, N, K, c=None, a_pack_k=True, b_pack_k=True, fast=False, k_steps=1):
    out = torch.empty(M, N, device=DEVICE)
    ga = K // (sa.shape[-1] // k_steps) if sa is not None else 32
    gb = K // (sb.shape[-1] // k_steps) if sb is not None else 32
    dot_scaled_kernel[(1,)](dev(a), dev(sa), dev(b), dev(sb), dev(c), out, M, N, K, fa, fb, a_pack_k, b_pack_k,
                            ga, gb, fast, c is not None, k_steps)
    return out.cpu()


def assert_close_dot(got, want, x, y, c=None):
    """Equal up to the summation order: f32 sums of the same K + 1 terms in any two orders differ by
    at most 2 (K + 1) u sum |terms| (u = 2^-24)."""
    magnitude = x.abs() @ y.abs() + (0 if c is None else c.abs())
    bound = 2 * (x.shape[-1] + 1) * 2.0**-24 * magnitude
    both_nan = got.isnan() & want.isnan()
    ok = both_nan | (got == want) | ((got - want).abs() <= bound)
    assert ok.all(), f"{(~ok).sum()} of {ok.numel()} differ; first: got {got[~ok][:4]}, want {want[~ok][:4]}"


def check(fa, fb, M, N, K, scale_a, scale_b, seed=0, a_pack_k=True, b_pack_k=True, with_c=False, k_steps=1):
    gen = torch.Generator().manual_seed(seed)
    ct = compute_type(fa, fb)
    KT = K * k_steps
    a = operand(fa, *packed_shape(fa, M, KT, 1 if a_pack_k else 0), gen)
    b = operand(fb, *packed_shape(fb, KT, N, 0 if b_pack_k else 1), gen)
    sa = scales(M, KT // 32, gen, ct) if scale_a else None
    sb = scales(N, KT // 32, gen, ct) if scale_b else None
    c = torch.randn(M, N, generator=gen) if with_c else None
    got = run(a, sa, fa, b, sb, fb, M, N, K, c, a_pack_k, b_pack_k, k_steps=k_steps)
    x = scaled(a, sa, fa, ct, -1 if a_pack_k else -2, True, False).float()
    y = scaled(b, sb, fb, ct, -2 if b_pack_k else -1, False, False).float()
    assert_close_dot(got, reference(a, sa, fa, b, sb, fb, c, a_pack_k, b_pack_k), x, y, c)


# -- every pair of formats -----------------------------------------------------------------------
@pytest.mark.parametrize("fb", FORMATS)
@pytest.mark.parametrize("fa", FORMATS)
def test_format_pairs(fa, fb):
    """Microscaling operands carry scales, 16-bit ones none (as Triton's users pass them)."""
    check(fa, fb, 16, 32, 64, fa in MX, fb in MX)


@pytest.mark.parametrize("fa, fb", [("e2m1", "e4m3"), ("e5m2", "e2m1"), ("e4m3", "e5m2"), ("bf16", "e2m1")])
@pytest.mark.parametrize("which", ["lhs", "rhs", "both", "none"])
def test_scaled_operands(fa, fb, which):
    check(fa, fb, 32, 16, 64, which in ("lhs", "both"), which in ("rhs", "both"), seed=1)


@pytest.mark.parametrize("M, N, K", [(1, 16, 32), (16, 1, 32), (64, 32, 128), (16, 64, 256)])
def test_shapes(M, N, K):
    check("e2m1", "e4m3", M, N, K, True, True, seed=2)


# -- the upcast and the scaling, bit for bit -------------------------------------------------------
@pytest.mark.parametrize("other", ["bf16", "fp16"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_upcast_and_scale_exact(fmt, other):
    """dot_scaled(a, scales, fmt, I) is a's scaled values: every finite byte value, scales over the
    whole range where the compute type has one (bf16: 0..254; f16: around its range, so that scales
    and products underflow to subnormals and zero and overflow)."""
    M, K = 128, 64
    gen = torch.Generator().manual_seed(3)
    a = operand(fmt, *packed_shape(fmt, M, K, 1), gen, every_byte=True)
    lo, hi = (0, 254) if compute_type(fmt, other) == torch.bfloat16 else (96, 150)
    sa = (lo + torch.arange(M * K // 32) % (hi - lo + 1)).to(torch.uint8).reshape(M, K // 32)
    eye = torch.eye(K, dtype=TORCH_FP[other])
    got = run(a, sa, fmt, eye, None, other, M, K, K)
    torch.testing.assert_close(got, reference(a, sa, fmt, eye, None, other), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("fast", [False, True], ids=["nan", "fast_math"])
@pytest.mark.parametrize("other", ["bf16", "fp16"])
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "bf16"])
def test_non_finite(fmt, other, fast):
    """Row sums (b = ones) of rows that hold one special value among zeros (inf, NaN encodings), and
    of rows of ones under the scales 0, 254 (overflows in f16) and 255 (NaN; inf with fast_math)."""
    K = 64
    specials = {"e4m3": [0x7F, 0xFF], "e5m2": [0x7C, 0xFC, 0x7D, 0xFF], "bf16": [0x7F80, 0xFF80, 0x7FC0]}[fmt]
    one = {"e4m3": 0x38, "e5m2": 0x3C, "bf16": 0x3F80}[fmt]
    raw_t = torch.int16 if fmt == "bf16" else torch.uint8
    rows = [[v] + [0] * (K - 1) for v in specials] + [[one] * K] * 3
    a = torch.tensor(rows, dtype=torch.int32).to(raw_t)
    a = a.view(torch.bfloat16) if fmt == "bf16" else a
    sa = torch.tensor([[127, 127]] * len(specials) + [[0, 127], [254, 127], [127, 255]], dtype=torch.uint8)
    M = len(rows)
    a = torch.cat([a, a[-1:].expand(8 - M, K)])
    sa = torch.cat([sa, sa[-1:].expand(8 - M, 2)])
    ones = torch.ones(K, 16, dtype=TORCH_FP[other])
    got = run(a, sa, fmt, ones, None, other, 8, 16, K, fast=fast)
    want = reference(a, sa, fmt, ones, None, other, fast=fast)
    assert not want[-1].isfinite().any() and want[-1].isnan().all() != fast
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_rhs_upcast_exact(fmt):
    """The same on the right-hand side: b's scales are [N, K/32] and spread along K."""
    N, K = 64, 64
    gen = torch.Generator().manual_seed(4)
    b = operand(fmt, *packed_shape(fmt, K, N, 0), gen, every_byte=True)
    sb = torch.randint(0, 255, (N, K // 32), dtype=torch.uint8, generator=gen)
    eye = torch.eye(K, dtype=torch.bfloat16)[:32]
    got = run(eye, None, "bf16", b, sb, fmt, 32, N, K)
    torch.testing.assert_close(got, reference(eye, None, "bf16", b, sb, fmt), rtol=0, atol=0, equal_nan=True)


# -- packing along M / N, batches, nvfp4, accumulation -------------------------------------------------
@pytest.mark.parametrize("a_pack_k, b_pack_k", [(False, True), (True, False), (False, False)])
def test_e2m1_packed_along_m_n(a_pack_k, b_pack_k):
    check("e2m1", "e2m1", 32, 16, 64, True, True, seed=5, a_pack_k=a_pack_k, b_pack_k=b_pack_k)


@pytest.mark.parametrize("fa, fb", [("e2m1", "bf16"), ("e4m3", "fp16")])
def test_batched(fa, fb):
    B, M, N, K = 2, 16, 8, 64
    gen = torch.Generator().manual_seed(6)
    ct = compute_type(fa, fb)
    a = torch.stack([operand(fa, *packed_shape(fa, M, K, 1), gen) for _ in range(B)])
    sa = torch.stack([scales(M, K // 32, gen, ct) for _ in range(B)])
    b = torch.stack([operand(fb, K, N, gen) for _ in range(B)])
    out = torch.empty(B, M, N, device=DEVICE)
    batched_kernel[(1,)](dev(a), dev(sa), dev(b), out, B, M, N, K, fa, fb)
    x, y = scaled(a, sa, fa, ct, -1, True, False).float(), b.float()
    assert_close_dot(out.cpu(), x @ y, x, y)


def test_nvfp4_e4m3_scales():
    """e4m3 scales, one per 16 elements (nvfp4): the scale's value, exactly."""
    M, N, K = 16, 32, 64
    gen = torch.Generator().manual_seed(7)
    a = operand("e2m1", M, K // 2, gen)
    b = operand("e2m1", K // 2, N, gen)
    sa = torch.rand(M, K // 16, generator=gen).to(torch.float8_e4m3fn)
    sb = torch.rand(N, K // 16, generator=gen).to(torch.float8_e4m3fn)
    got = run(a, sa, "e2m1", b, sb, "e2m1", M, N, K)
    x = unpack_e2m1(a, -1) * sa.float().repeat_interleave(16, -1)
    y = unpack_e2m1(b, 0) * sb.float().repeat_interleave(16, -1).T
    assert_close_dot(got, x @ y, x, y)


def test_accumulates_in_a_loop():
    """acc = tl.dot_scaled(a, sa, .., acc) over K blocks, starting from a loaded c."""
    check("e2m1", "e5m2", 16, 32, 64, True, True, seed=8, with_c=True, k_steps=3)


# -- errors ------------------------------------------------------------------------------------------
def test_scale_of_unsupported_type():
    gen = torch.Generator().manual_seed(9)
    a = operand("e4m3", 16, 64, gen)
    b = operand("e4m3", 64, 32, gen)
    sa = torch.ones(16, 2, dtype=torch.float8_e5m2)
    with pytest.raises(CompilationError, match=r"scale of shape \[16, 2\] and type f8E5M2"):
        run(a, sa, "e4m3", b, None, "e4m3", 16, 32, 64)


@pytest.mark.parametrize("scale_lhs", [True, False], ids=["lhs", "rhs"])
def test_lone_scale_with_m_equal_n(scale_lhs):
    check("e4m3", "e5m2", 32, 32, 64, scale_lhs, not scale_lhs, seed=10)


_TTIR = """
module {
  tt.func public @k(%a_ptr: !tt.ptr<i8>, %b_ptr: !tt.ptr<f8E4M3FN>, %o_ptr: !tt.ptr<f32>) {
    %r16 = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
    %row = tt.expand_dims %r16 {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
    %col = tt.expand_dims %r16 {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
    %c16 = arith.constant dense<16> : tensor<16x1xi32>
    %rs = arith.muli %row, %c16 : tensor<16x1xi32>
    %rb = tt.broadcast %rs : tensor<16x1xi32> -> tensor<16x16xi32>
    %cb = tt.broadcast %col : tensor<1x16xi32> -> tensor<16x16xi32>
    %offs = arith.addi %rb, %cb : tensor<16x16xi32>
    %ap = tt.splat %a_ptr : !tt.ptr<i8> -> tensor<16x16x!tt.ptr<i8>>
    %ap2 = tt.addptr %ap, %offs : tensor<16x16x!tt.ptr<i8>>, tensor<16x16xi32>
    %a = tt.load %ap2 : tensor<16x16x!tt.ptr<i8>>
    %bp = tt.splat %b_ptr : !tt.ptr<f8E4M3FN> -> tensor<16x16x!tt.ptr<f8E4M3FN>>
    %bp2 = tt.addptr %bp, %offs : tensor<16x16x!tt.ptr<f8E4M3FN>>, tensor<16x16xi32>
    %b = tt.load %bp2 : tensor<16x16x!tt.ptr<f8E4M3FN>>
    %zero = arith.constant dense<0.000000e+00> : tensor<16x16xf32>
    %d = tt.dot_scaled %a, %b, %zero lhs = LHS rhs = e4m3 {fastMath = false} : tensor<16x16xi8> * tensor<16x16xf8E4M3FN> -> tensor<16x16xf32>
    %op = tt.splat %o_ptr : !tt.ptr<f32> -> tensor<16x16x!tt.ptr<f32>>
    %op2 = tt.addptr %op, %offs : tensor<16x16x!tt.ptr<f32>>, tensor<16x16xi32>
    tt.store %op2, %d : tensor<16x16x!tt.ptr<f32>>
    tt.return
  }
}
"""


@pytest.mark.parametrize("fmt", ["e2m3", "e3m2"])
def test_fp6_formats_are_refused(fmt):
    """fp6 operands (the enum has them; tl.dot_scaled refuses them, hand-written TTIR need not)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.ttir")
        with open(path, "w") as f:
            f.write(_TTIR.replace("LHS", fmt))
        with pytest.raises(CompilationError, match=f"operand format {fmt}"):
            triton.compile(path)
