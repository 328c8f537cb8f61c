"""Accuracy of the SFU's vectorised f32 functions (runtime/vmath.h) and of libdevice's Bessel composites.

Table-driven. For each function: random bit patterns (every binade, subnormals, infinities, NaNs) and
uniform samples of the interval where the function is not constant, compared with a float64
reference in ulps of the f32 result; special values compared exactly (NaN as any NaN, signed zeros by
sign); f16 and bf16 give the f32 result rounded once. The ulp bounds are the maxima of the same
comparison run in C over all 2^32 inputs. That the baseline, AVX2 and AVX-512 builds give the same bits
on these samples is tests/runtime/test_simd_builds.py's.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.special as sps
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from asm_helpers import run_elementwise


inf, nan = np.inf, np.nan
TINY = float(np.float32(1e-45))      # the smallest subnormal

# fn: (float64 reference, interval where the result is not constant, bound on the ulp error). The
# bounds are the maxima over all 2^32 inputs, rounded up: exp 0.989, exp2 1.079, exp10 1.259,
# expm1 1.095, log 0.923, log2 1.260, log10 1.143, log1p 1.014, tanh 1.066, erf 1.319, sqrt 0.500
# (correctly rounded), rsqrt 1.490 (two roundings), sin 0.732, cos 0.726.
FUNCS = {
    "exp": (np.exp, (-104.0, 89.0), 1.0),
    "exp2": (np.exp2, (-151.0, 129.0), 1.1),
    "exp10": (lambda x: np.power(10.0, x), (-46.0, 39.0), 1.3),
    "expm1": (np.expm1, (-18.0, 89.0), 1.1),
    "log": (np.log, (0.0, 4.0), 0.95),
    "log2": (np.log2, (0.0, 4.0), 1.3),
    "log10": (np.log10, (0.0, 4.0), 1.15),
    "log1p": (np.log1p, (-1.0, 4.0), 1.05),
    "tanh": (np.tanh, (-9.5, 9.5), 1.1),
    "erf": (sps.erf, (-4.0, 4.0), 1.35),
    "sqrt": (np.sqrt, (0.0, 4.0), 0.501),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), (0.0, 4.0), 1.5),
    "sin": (np.sin, (-6e5, 6e5), 0.75),    # past 2^19: libm's sinf, cosf
    "cos": (np.cos, (-6e5, 6e5), 0.75),
}

# exact results: (x, f(x)); NaN means any NaN
SPECIAL = {
    "exp": [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (89.0, inf), (1e30, inf), (-104.0, 0.0),
            (-1e30, 0.0), (TINY, 1.0), (-TINY, 1.0)],
    "exp2": [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (128.0, inf), (127.0, 2.0 ** 127),
             (-149.0, TINY), (-126.0, 2.0 ** -126), (-151.0, 0.0), (1.0, 2.0), (-1.0, 0.5), (10.0, 1024.0)],
    "exp10": [(0.0, 1.0), (-0.0, 1.0), (inf, inf), (-inf, 0.0), (nan, nan), (39.0, inf), (-46.0, 0.0)],
    "expm1": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-inf, -1.0), (nan, nan), (89.0, inf), (-18.0, -1.0),
              (-1e30, -1.0), (TINY, TINY), (-TINY, -TINY), (1e-30, 1e-30)],
    "log": [(1.0, 0.0), (0.0, -inf), (-0.0, -inf), (inf, inf), (-inf, nan), (-1.0, nan), (-TINY, nan), (nan, nan)],
    "log2": [(1.0, 0.0), (0.0, -inf), (-0.0, -inf), (inf, inf), (-inf, nan), (-1.0, nan), (nan, nan),
             (2.0, 1.0), (0.5, -1.0), (2.0 ** 100, 100.0), (TINY, -149.0), (2.0 ** -130, -130.0)],
    "log10": [(1.0, 0.0), (0.0, -inf), (-0.0, -inf), (inf, inf), (-inf, nan), (-1.0, nan), (nan, nan)],
    "log1p": [(0.0, 0.0), (-0.0, -0.0), (-1.0, -inf), (-2.0, nan), (inf, inf), (-inf, nan), (nan, nan),
              (TINY, TINY), (-TINY, -TINY), (1e-30, 1e-30)],
    "tanh": [(0.0, 0.0), (-0.0, -0.0), (inf, 1.0), (-inf, -1.0), (nan, nan), (20.0, 1.0), (-20.0, -1.0),
             (TINY, TINY), (-TINY, -TINY), (1e-30, 1e-30)],
    "erf": [(0.0, 0.0), (-0.0, -0.0), (inf, 1.0), (-inf, -1.0), (nan, nan), (4.0, 1.0), (-10.0, -1.0)],
    "sqrt": [(0.0, 0.0), (-0.0, -0.0), (inf, inf), (-1.0, nan), (-inf, nan), (nan, nan), (4.0, 2.0)],
    "rsqrt": [(0.0, inf), (-0.0, -inf), (inf, 0.0), (-1.0, nan), (nan, nan), (4.0, 0.5)],
    "sin": [(0.0, 0.0), (-0.0, -0.0), (inf, nan), (-inf, nan), (nan, nan), (TINY, TINY), (-1e-30, -1e-30)],
    "cos": [(0.0, 1.0), (-0.0, 1.0), (inf, nan), (-inf, nan), (nan, nan), (TINY, 1.0)],
}

N_BITS, N_UNIFORM, CHUNK = 1 << 16, 1 << 16, 1 << 16


def rng(name: str) -> np.random.Generator:
    """The same samples for a test whatever ran before it (xdist distributes tests in any order)."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def samples(fn: str) -> np.ndarray:
    """Random bit patterns over the whole f32 range, then uniform samples of the interesting interval."""
    lo, hi = FUNCS[fn][1]
    r = rng(fn)
    bits = r.integers(0, 1 << 32, N_BITS, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([bits, r.uniform(lo, hi, N_UNIFORM).astype(np.float32)])


def math1(fn: str, x: np.ndarray, t: str = "f32") -> np.ndarray:
    return np.concatenate([run_elementwise("math1", t, [x[i:i + CHUNK]], flags={"fn": fn})
                           for i in range(0, len(x), CHUNK)])


def ulp_errors(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| in ulps of f32 at ref; infinity counts as 2^128 (so overflow is exact past 2^128 and
    within an ulp of it just below)."""
    g = got.astype(np.float64)
    g = np.where(np.isinf(g) & np.isfinite(ref), np.sign(g) * 2.0 ** 128, g)
    ref = np.clip(ref, -2.0 ** 128, 2.0 ** 128)
    _, e = np.frexp(ref)
    ulp = np.ldexp(1.0, np.maximum(e - 1, -126) - 23)
    return np.abs(g - ref) / ulp


@pytest.mark.parametrize("fn", list(FUNCS))
def test_f32_accuracy(fn):
    ref_fn, _, max_ulp = FUNCS[fn]
    x = samples(fn)
    got = math1(fn, x)
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    nan_ref = np.isnan(ref)
    assert (np.isnan(got) == nan_ref).all(), f"{fn}: NaN mismatch at x={x[np.isnan(got) != nan_ref][:5]}"
    big = np.isinf(ref)   # overflowed in float64 too
    assert (got[big] == ref[big]).all(), f"{fn}: x={x[big][got[big] != ref[big]][:5]}"
    ok = ~nan_ref & ~big
    err = ulp_errors(got[ok], ref[ok])
    worst = np.argmax(err)
    assert err[worst] <= max_ulp, f"{fn}: {err[worst]:.3f} ulp at x={x[ok][worst]!r}: got {got[ok][worst]!r}, want {ref[ok][worst]!r}"
    zero = ref[ok] == 0
    assert (np.signbit(got[ok][zero]) == np.signbit(ref[ok][zero])).all(), f"{fn}: signed zero"


@pytest.mark.parametrize("fn", list(SPECIAL))
def test_f32_special_values(fn):
    x = np.array([a for a, _ in SPECIAL[fn]], np.float32)
    want = np.array([b for _, b in SPECIAL[fn]], np.float32)
    got = math1(fn, x)
    same = np.where(np.isnan(want), np.isnan(got), (got == want) & (np.signbit(got) == np.signbit(want)))
    assert same.all(), f"{fn}: x={x[~same]} got {got[~same]} want {want[~same]}"


@pytest.mark.parametrize("t", ["f16", "bf16"])
@pytest.mark.parametrize("fn", list(FUNCS))
def test_half_is_f32_rounded_once(fn, t):
    """Every f16/bf16 input: the result is the f32 function's result rounded to nearest even."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    if t == "f16":
        inp, x32, tt = bits.view(np.float16), bits.view(np.float16).astype(np.float32), torch.float16
    else:
        inp, x32, tt = bits, (bits.astype(np.uint32) << 16).view(np.float32), torch.bfloat16
    got = math1(fn, inp, t).view(np.uint16)
    f32 = math1(fn, x32)
    want = torch.from_numpy(f32).to(tt).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(f32)
    got_nan = torch.from_numpy(got.view(np.int16)).view(tt).isnan().numpy()
    assert (got_nan == nan).all(), f"{fn}.{t}: NaN mismatch"
    diff = np.nonzero((got != want) & ~nan)[0]
    assert len(diff) == 0, f"{fn}.{t}: {len(diff)} results differ, first at input bits {bits[diff[:4]]}"


# ---- libdevice.cyl_bessel_i0 / i1 ----------------------------------------------------------------
from conftest import DEVICE


@triton.jit
def _bessel_kernel(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if FN == "i0":
        y = libdevice.cyl_bessel_i0(x)
    else:
        y = libdevice.cyl_bessel_i1(x)
    tl.store(y_ptr + offs, y, mask=m)


# dtype: (max relative error, measured on these inputs and rounded up)
BESSEL_TOL = {torch.float64: 5e-15, torch.float32: 5e-7, torch.float16: 1e-3}


@pytest.mark.parametrize("dtype", list(BESSEL_TOL))
@pytest.mark.parametrize("fn", ["i0", "i1"])
def test_bessel(fn, dtype):
    edge = 91.5 if dtype == torch.float32 else 11.0 if dtype == torch.float16 else 713.0   # overflow nearby
    xs = np.concatenate([np.linspace(-edge, edge, 4001), rng(fn).standard_normal(1000) * 4,
                         [0.0, -0.0, 8.0, -8.0, 8.000001, 1e-30, edge + 1, -edge - 1, inf, -inf, nan]])
    x = torch.tensor(xs).to(dtype)
    y = torch.empty_like(x, device=DEVICE)
    _bessel_kernel[(triton.cdiv(len(x), 1024),)](x.to(DEVICE), y, len(x), FN=fn, BLOCK=1024)
    got = y.cpu().double().numpy()
    xd = x.double().numpy()
    # e^|x| in two halves so that the reference reaches the largest finite doubles (scipy's i0, i1
    # overflow early); I1 odd, so I1(-0) = -0
    with np.errstate(over="ignore", invalid="ignore"):
        h = np.exp(np.abs(xd) / 2)
        ref = (sps.i0e(xd) if fn == "i0" else sps.i1e(xd)) * h * h
    ref = np.where(xd == 0, 1.0 if fn == "i0" else xd, ref)
    ref = torch.from_numpy(ref).to(dtype).double().numpy()  # rounded to dtype: overflow and zeros as dtype
    exact = ~np.isfinite(ref) | (ref == 0)
    assert np.array_equal(got[exact], ref[exact], equal_nan=True), f"{fn}: x={xd[exact]} got {got[exact]}"
    assert (np.signbit(got[ref == 0]) == np.signbit(ref[ref == 0])).all()
    rel = np.abs(got[~exact] - ref[~exact]) / np.abs(ref[~exact])
    worst = np.argmax(rel)
    assert rel[worst] <= BESSEL_TOL[dtype], f"{fn}.{dtype}: rel {rel[worst]:.3g} at x={xd[~exact][worst]!r}"
