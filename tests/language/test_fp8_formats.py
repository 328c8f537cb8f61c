"""Every fp8 type of Triton through compiled kernels: casts (each bit pattern up, f16/bf16/f32 down),
saturation, NaN and zero encodings, loads, tl.abs, constants and tl.dot.

    fp8e4nv  = torch.float8_e4m3fn      fp8e5    = torch.float8_e5m2
    fp8e4b8  = torch.float8_e4m3fnuz    fp8e5b16 = torch.float8_e5m2fnuz     (0x80 the only NaN, no -0)
    fp8e4b15: e4m3 with bias 15 and no special values; no torch type, so a bit-level reference of
              Triton's CUDA conversion (third_party/nvidia/language/cuda/utils.py) stands in.

Triton's fp8 downcasts saturate (satfinite): overflow and +-inf give +-max, NaN stays NaN, where torch
gives inf (e5m2) or NaN (e4m3fn, fnuz) for out-of-range values; in range, the bits equal torch's.
(For +-inf to fnuz, Triton's AMD software conversion gives NaN; Spyre saturates, as for the others.)
"""
import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE

TORCH = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2,
         "fp8e4b8": torch.float8_e4m3fnuz, "fp8e5b16": torch.float8_e5m2fnuz}
TL = {"fp8e4nv": tl.float8e4nv, "fp8e5": tl.float8e5, "fp8e4b8": tl.float8e4b8, "fp8e5b16": tl.float8e5b16,
      "fp8e4b15": tl.float8e4b15, "f16": tl.float16, "bf16": tl.bfloat16, "f32": tl.float32, "f64": tl.float64}
TT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
MAX = {"fp8e4nv": 448.0, "fp8e5": 57344.0, "fp8e4b8": 240.0, "fp8e5b16": 57344.0, "fp8e4b15": 1.75}
FP8 = list(MAX)
RNG = np.random.default_rng(0)


@triton.jit
def cast_kernel(X, Y, N, R: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(X + offs, mask=m)
    tl.store(Y + offs, x.to(Y.dtype.element_ty, fp_downcast_rounding=R), mask=m)


def run_cast(x: torch.Tensor, src: str, dst: str, rounding=None) -> torch.Tensor:
    """x (uint8 bits for fp8 sources, else values) cast by a kernel; uint8 bits for fp8 results."""
    xin = x.to(DEVICE)
    out = torch.empty(x.shape, dtype=torch.uint8 if dst in FP8 else TT[dst], device=DEVICE)
    X = triton.reinterpret(xin, TL[src]) if src in FP8 else xin
    Y = triton.reinterpret(out, TL[dst]) if dst in FP8 else out
    cast_kernel[(triton.cdiv(x.numel(), 1024), )](X, Y, x.numel(), rounding, BLOCK=1024)
    return out.cpu()


def ref_e4b15_to_f16(codes: np.ndarray) -> np.ndarray:
    c = codes.astype(np.uint16)
    return ((c & 0x80) << 8 | (c & 0x7F) << 7).astype(np.uint16).view(np.float16)


def ref_f16_to_e4b15(h: np.ndarray) -> np.ndarray:
    bits = h.view(np.uint16).astype(np.int64)
    mag = np.minimum(bits & 0x7FFF, 0x3F00)
    return (((mag + 0x40) >> 7) | ((bits & 0x8000) >> 8)).astype(np.uint8)


def all_codes():
    return torch.arange(256, dtype=torch.int32).to(torch.uint8)


def f16_patterns():
    return torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16)


def same_float(got: torch.Tensor, exp: torch.Tensor):
    """Equal values, NaN where NaN, and the same sign of zero."""
    g, e = got.double(), exp.double()
    assert torch.equal(g.isnan(), e.isnan())
    ok = ~e.isnan()
    assert torch.equal(g[ok], e[ok])
    assert torch.equal(torch.signbit(g[ok]), torch.signbit(e[ok]))


# ---- upcasts: every bit pattern ---------------------------------------------------------------
@pytest.mark.parametrize("dst", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("src", ["fp8e4b8", "fp8e5b16", "fp8e4nv", "fp8e5"])
def test_upcast_every_pattern_as_torch(src, dst):
    codes = all_codes()
    same_float(run_cast(codes, src, dst), codes.view(TORCH[src]).to(TT[dst]))


@pytest.mark.parametrize("dst", ["f16", "f32", "bf16"])
def test_upcast_e4b15_every_pattern(dst):
    codes = all_codes()
    exp = torch.from_numpy(ref_e4b15_to_f16(codes.numpy()))
    got = run_cast(codes, "fp8e4b15", dst)
    same_float(got, exp.to(TT[dst]))
    assert got[0x7F].item() == 1.875 and got[0xFF].item() == -1.875 and not got.isnan().any()


# ---- downcasts ---------------------------------------------------------------------------------
def sources(src: str) -> torch.Tensor:
    """Every f16 pattern, and for f32 also random values over a wide range; in src's dtype."""
    x = f16_patterns().to(torch.float32)
    if src == "f32":
        r = torch.from_numpy(RNG.standard_normal(20000) * np.exp2(RNG.integers(-24, 20, 20000))).float()
        x = torch.cat([x, r])
    return x.to(TT[src])


@pytest.mark.parametrize("src", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("dst", ["fp8e4b8", "fp8e5b16", "fp8e4nv", "fp8e5"])
def test_downcast_rtne_as_torch_in_range_saturating_outside(src, dst):
    x = sources(src)
    got = run_cast(x, src, dst, "rtne")
    ref = x.to(TORCH[dst]).view(torch.uint8)
    xd = x.double()
    mx = MAX[dst]
    decoded = got.view(TORCH[dst]).double()
    # in range (including what rounds to max): torch's bits; NaN: a NaN
    inr = xd.abs() <= mx
    assert torch.equal(got[inr], ref[inr])
    assert decoded[xd.isnan()].isnan().all()
    if dst in ("fp8e4b8", "fp8e5b16"):
        assert (got[xd.isnan()] == 0x80).all()  # the one NaN; and no negative zero
        assert not (got[inr] == 0x80).any()
    # beyond max, finite or inf: +-max
    over = (xd.abs() > mx) & ~xd.isnan()
    assert over.any()
    assert torch.equal(decoded[over], torch.where(xd[over] > 0, mx, -mx).double())


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("src", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("dst", ["fp8e5", "fp8e4nv"])
def test_downcast_saturates(dst, src, rounding):
    """Upstream test_typeconvert_downcast_clamping: +-inf and overflow give +-max, NaN stays NaN. Except that
    Triton's rtz path to fp8e5 truncates an f16 (rtz), which keeps +-inf as +-inf."""
    mx = MAX[dst]
    vals = [math.inf, -math.inf, mx + 100.0 if src != "bf16" else 2 * mx, -2 * mx, math.nan, mx, -mx, 0.0, -0.0]
    x = torch.tensor(vals, dtype=TT[src])
    got = run_cast(x, src, dst, rounding).view(TORCH[dst]).double()
    exp = torch.tensor([mx, -mx, mx, -mx, math.nan, mx, -mx, 0.0, -0.0], dtype=torch.float64)
    if (dst, rounding) == ("fp8e5", "rtz"):  # an input that is inf in its own type (2 * max in f16 is) stays inf
        exp = torch.where(x.double().isinf(), x.double(), exp)
    same_float(got, exp)


@pytest.mark.parametrize("src", ["f16", "f32", "bf16", "f64", "fp8e5", "fp8e4nv"])
def test_downcast_to_e4b15(src):
    """Triton's CUDA rule: via f16 (toward zero from wider types), clamp |h| to 1.75, round half away."""
    if src == "f16":
        x = f16_patterns()
        exp = ref_f16_to_e4b15(x.numpy())
    elif src in ("fp8e5", "fp8e4nv"):
        x = all_codes()
        exp = ref_f16_to_e4b15(x.view(TORCH[src]).to(torch.float16).numpy())
        nan = x.view(TORCH[src]).isnan().numpy()  # NaN gives +-1.75 (the sign of a NaN is not kept)
        exp[nan] = 0x7E
        x, exp = x[~torch.from_numpy(nan)], exp[~nan]
        assert (run_cast(all_codes()[torch.from_numpy(nan)], src, "fp8e4b15").numpy() & 0x7F == 0x7E).all()
    else:
        xf = torch.cat([f16_patterns().float(),
                        torch.from_numpy(RNG.standard_normal(5000) * np.exp2(RNG.integers(-20, 2, 5000))).float()])
        x = xf.to(TT[src])
        # f32/f64 -> f16 toward zero, as Triton does; bf16 is exact in f32 first
        x32 = x.float()
        h = x32.to(torch.float16)
        toward_zero = torch.where(h.float().abs() > x32.abs(), torch.nextafter(h, torch.zeros_like(h)), h)
        toward_zero = torch.where(x32.isinf() | x32.isnan(), h, toward_zero)
        if src == "f64":  # f64 -> f16 directly, toward zero: same as via f32 unless f32 rounding crosses an f16
            h64 = x.to(torch.float16)
            tz64 = torch.where(h64.double().abs() > x.abs(), torch.nextafter(h64, torch.zeros_like(h64)), h64)
            toward_zero = torch.where(x.isinf() | x.isnan(), h64, tz64)
        exp = ref_f16_to_e4b15(toward_zero.numpy())
    got = run_cast(x, src, "fp8e4b15", "rtne" if src in ("f32", "f64") else None)
    assert np.array_equal(got.numpy(), exp)


@triton.jit
def const_cast_kernel(Y, V: tl.constexpr, N: tl.constexpr):
    tl.store(Y + tl.arange(0, N), tl.full((N, ), V, tl.float32).to(Y.dtype.element_ty))


@pytest.mark.parametrize("t", ["fp8e5", "fp8e4nv", "fp8e4b8", "fp8e5b16"])
@pytest.mark.parametrize("v", [math.inf, -math.inf, 1e6])
def test_downcast_of_a_constant_saturates(t, v):
    y = torch.empty(4, dtype=torch.uint8, device=DEVICE)
    const_cast_kernel[(1, )](triton.reinterpret(y, TL[t]), v, 4)
    assert (y.cpu().view(TORCH[t]).double() == math.copysign(MAX[t], v)).all()


def test_e4b15_special_values():
    x = torch.tensor([math.inf, -math.inf, math.nan, 1.8125, 1.8126, -100.0, -0.0, 0.0, 1.0, 2.0 ** -18,
                      3 * 2.0 ** -18], dtype=torch.float32)
    got = run_cast(x, "f32", "fp8e4b15", "rtne").tolist()
    # inf and NaN clamp to 1.75; 1.8125 (halfway to 1.875) clamps; -0 keeps its sign; 2^-18 is half the
    # smallest subnormal (2^-17): rounds away from zero to it; 3 * 2^-18 to 2 * 2^-17
    assert got == [0x7E, 0xFE, 0x7E, 0x7E, 0x7E, 0xFE, 0x80, 0x00, 0x78, 0x01, 0x02]


# ---- loads, abs, constants, dot ------------------------------------------------------------------
@triton.jit
def abs_kernel(X, Z, N: tl.constexpr):
    off = tl.arange(0, N)
    tl.store(Z + off, tl.abs(tl.load(X + off)))


@pytest.mark.parametrize("t", FP8)
def test_abs_clears_the_sign(t):
    codes = all_codes()
    out = torch.empty(256, dtype=torch.uint8, device=DEVICE)
    abs_kernel[(1, )](triton.reinterpret(codes.to(DEVICE), TL[t]), triton.reinterpret(out, TL[t]), 256)
    got = out.cpu()
    if t in TORCH:
        dec = got.view(TORCH[t]).double()
        exp = codes.view(TORCH[t]).double().abs()
        assert torch.equal(dec.isnan(), exp.isnan())
        assert torch.equal(dec[~exp.isnan()], exp[~exp.isnan()])
    else:  # e4b15: and with 0x7F (Triton's definition)
        assert torch.equal(got, codes & 0x7F)


@triton.jit
def masked_load_kernel(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=1.5)  # `other` is cast to the pointee type
    tl.store(Y + offs, x.to(tl.float32))


@pytest.mark.parametrize("t", FP8)
def test_masked_load_other(t):
    codes = torch.tensor([0x38, 0x40, 0xB8, 0x01], dtype=torch.uint8)
    y = torch.empty(8, dtype=torch.float32, device=DEVICE)
    masked_load_kernel[(1, )](triton.reinterpret(codes.to(DEVICE), TL[t]), y, 4, BLOCK=8)
    got = y.cpu()
    head = (torch.from_numpy(ref_e4b15_to_f16(codes.numpy())).float() if t == "fp8e4b15"
            else codes.view(TORCH[t]).float())
    assert torch.equal(got[:4], head)
    assert (got[4:] == 1.5).all()


@triton.jit
def const_kernel(Y, V: tl.constexpr, N: tl.constexpr):
    tl.store(Y + tl.arange(0, N), tl.full((N, ), V, Y.dtype.element_ty))


@pytest.mark.parametrize("t", ["fp8e4b8", "fp8e5b16", "fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("v", [1.5, -0.25, 3.0])
def test_constants(t, v):
    y = torch.empty(4, dtype=torch.uint8, device=DEVICE)
    const_kernel[(1, )](triton.reinterpret(y, TL[t]), v, 4)
    assert (y.cpu() == torch.tensor([v]).to(TORCH[t]).view(torch.uint8)).all()


@triton.jit
def dot_kernel(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + rm[:, None] * K + rk[None, :])
    b = tl.load(B + rk[:, None] * N + rn[None, :])
    tl.store(C + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("t", FP8)
def test_dot(t):
    M, N, K = 16, 32, 64
    g = torch.Generator().manual_seed(1)
    # finite codes only: no NaN patterns (0x80 fnuz, 0x7F/0xFF e4m3fn, exponent all ones for e5m2)
    vals = torch.randint(0, 256, (M * K + K * N, ), generator=g).to(torch.uint8)
    if t == "fp8e4b15":
        dec = torch.from_numpy(ref_e4b15_to_f16(vals.numpy())).float()
    else:
        dec = vals.view(TORCH[t]).float()
        vals = torch.where(dec.isnan() | dec.isinf(), torch.zeros_like(vals), vals)
        dec = vals.view(TORCH[t]).float()
    a, b = vals[:M * K].reshape(M, K), vals[M * K:].reshape(K, N)
    c = torch.empty((M, N), dtype=torch.float32, device=DEVICE)
    dot_kernel[(1, )](triton.reinterpret(a.to(DEVICE), TL[t]), triton.reinterpret(b.to(DEVICE), TL[t]), c, M, N, K)
    ref = dec[:M * K].reshape(M, K).double() @ dec[M * K:].reshape(K, N).double()
    torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta, tb", [("fp8e4b8", "fp8e5b16"), ("fp8e4nv", "fp8e5"), ("fp8e5b16", "fp8e4nv")])
def test_dot_of_two_fp8_types(ta, tb):
    M, N, K = 16, 16, 32
    g = torch.Generator().manual_seed(2)
    a = torch.randint(0, 0x70, (M, K), generator=g).to(torch.uint8) | (torch.randint(0, 2, (M, K), generator=g) << 7).to(torch.uint8)
    b = torch.randint(0, 0x70, (K, N), generator=g).to(torch.uint8)
    a = torch.where(a == 0x80, torch.zeros_like(a), a)  # not the fnuz NaN
    c = torch.empty((M, N), dtype=torch.float32, device=DEVICE)
    dot_kernel[(1, )](triton.reinterpret(a.to(DEVICE), TL[ta]), triton.reinterpret(b.to(DEVICE), TL[tb]), c, M, N, K)
    ref = a.view(TORCH[ta]).double() @ b.view(TORCH[tb]).double()
    torch.testing.assert_close(c.cpu().double(), ref, rtol=1e-5, atol=1e-6 * ref.abs().max().item())  # f32 sums
