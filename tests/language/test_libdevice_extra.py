"""libdevice beyond the SFU table: integer bit operations, reinterpretations, conversions with a
rounding mode and small float composites, each against a numpy/Python reference. Most tests pass the
function into one kernel as a constexpr (spyre's module itself); the norms test calls them through
`triton.language.extra.libdevice` in the kernel source, as users do."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from spyre_triton import libdevice as spyre_libdevice  # the functions themselves, to pass as FN

from conftest import DEVICE
RNG = np.random.default_rng(7)


@triton.jit
def unary(x_ptr, o_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, FN(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def binary(x_ptr, y_ptr, o_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, FN(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)


def run(fn, out_dtype, *args):
    ts = [torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE) for a in args]
    out = torch.empty(len(args[0]), dtype=out_dtype, device=DEVICE)
    kernel = unary if len(args) == 1 else binary
    kernel[(1,)](*ts, out, len(args[0]), FN=fn, BLOCK=triton.next_power_of_2(len(args[0])))
    return out.cpu().numpy()


def ints(dtype, n=64):
    info = np.iinfo(dtype)
    edge = np.array([0, 1, 2, 3, info.max, info.min, info.max - 1, info.min + 1], dtype=dtype)
    rand = RNG.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    return np.concatenate([edge, rand])


def bits(v, width):
    return int(v) & ((1 << width) - 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64], ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", ["clz", "popc", "ffs", "brev"])
def test_bit_operations(name, dtype):
    x = ints(dtype)
    w = np.dtype(dtype).itemsize * 8
    fn = getattr(spyre_libdevice, name)
    if name == "brev":
        got = run(fn, torch.from_numpy(x).dtype if dtype != np.uint64 else torch.uint64, x)
        want = [int(f"{bits(v, w):0{w}b}"[::-1], 2) for v in x]
        assert [bits(g, w) for g in got] == want
        return
    got = run(fn, torch.int32, x)
    ref = {"clz": lambda u: w - u.bit_length(), "popc": lambda u: bin(u).count("1"),
           "ffs": lambda u: (u & -u).bit_length()}[name]
    assert got.tolist() == [ref(bits(v, w)) for v in x]


@pytest.mark.parametrize("name,ref", [
    ("hadd", lambda x, y: (x + y) >> 1), ("rhadd", lambda x, y: (x + y + 1) >> 1),
    ("mul24", lambda x, y: ((((x << 8) & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000 >> 8) * (((((y << 8) & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000) >> 8)),
    ("mulhi", lambda x, y: (x * y) >> 32)])
def test_integer_pairs(name, ref):
    x, y = ints(np.int32), ints(np.int32)[::-1].copy()
    got = run(getattr(spyre_libdevice, name), torch.int32, x, y)
    want = [((ref(int(a), int(b)) + 2**31) % 2**32) - 2**31 for a, b in zip(x, y)]
    assert got.tolist() == want


def test_sad_and_unsigned_mulhi():
    x, y = ints(np.uint32), ints(np.uint32)[::-1].copy()
    assert run(spyre_libdevice.mulhi, torch.uint32, x, y).tolist() == [(int(a) * int(b)) >> 32 for a, b in zip(x, y)]


@pytest.mark.parametrize("name,src,dst", [
    ("float_as_int", np.float32, np.int32), ("int_as_float", np.int32, np.float32),
    ("float_as_uint", np.float32, np.uint32), ("uint_as_float", np.uint32, np.float32),
    ("double_as_longlong", np.float64, np.int64), ("longlong_as_double", np.int64, np.float64)])
def test_reinterpretations(name, src, dst):
    raw = ints(np.int32 if np.dtype(src).itemsize == 4 else np.int64)
    x = raw.view(src) if np.dtype(src).kind == "f" else raw.astype(src)
    got = run(getattr(spyre_libdevice, name), torch.from_numpy(np.zeros(1, dst)).dtype, x)
    assert got.view(np.uint8).tobytes() == x.view(np.uint8).tobytes()


def test_double_words():
    x = np.array([1.0, -2.5, math.pi, 0.0, -0.0, math.inf, 1e-310], dtype=np.float64)
    hi = run(spyre_libdevice.double2hiint, torch.int32, x)
    lo = run(spyre_libdevice.double2loint, torch.int32, x)
    assert (hi.astype(np.int64) << 32 | lo.astype(np.int64) & 0xFFFFFFFF).tolist() == x.view(np.int64).tolist()
    back = run(spyre_libdevice.hiloint2double, torch.float64, hi, lo)
    assert back.view(np.int64).tolist() == x.view(np.int64).tolist()


ROUND = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


@pytest.mark.parametrize("src", ["float", "double"])
@pytest.mark.parametrize("dst,ty", [("int", np.int32), ("uint", np.uint32), ("ll", np.int64), ("ull", np.uint64)])
@pytest.mark.parametrize("mode", ["rn", "rz", "rd", "ru"])
def test_float_to_int_with_rounding(src, dst, ty, mode):
    fty = np.float32 if src == "float" else np.float64
    x = np.array([0.5, 1.5, 2.5, 2.49, 2.51, 7.0, 0.0, 1e6 + 0.5, 123.75, 3.5], dtype=fty)
    if np.dtype(ty).kind == "i":
        x = np.concatenate([x, -x])
    got = run(getattr(spyre_libdevice, f"{src}2{dst}_{mode}"), torch.from_numpy(np.zeros(1, ty)).dtype, x)
    assert got.tolist() == ROUND[mode](x).astype(ty).tolist()


@pytest.mark.parametrize("name,src,dst", [
    ("int2float_rn", np.int32, np.float32), ("uint2float_rn", np.uint32, np.float32),
    ("ll2float_rn", np.int64, np.float32), ("ull2float_rn", np.uint64, np.float32),
    ("int2double_rn", np.int32, np.float64), ("uint2double_rn", np.uint32, np.float64),
    ("ll2double_rn", np.int64, np.float64), ("ull2double_rn", np.uint64, np.float64)])
def test_int_to_float_rn(name, src, dst):
    x = ints(src)
    got = run(getattr(spyre_libdevice, name), torch.from_numpy(np.zeros(1, dst)).dtype, x)
    # Python's int -> float rounds to nearest even, once
    want = [float(np.array(float(int(v)) if dst == np.float64 else np.float32(int(v)))) for v in x]
    assert got.tolist() == want


def test_double_to_float_rn_and_rz():
    x = np.array([1 + 2**-30, -(1 + 2**-30), 1 + 2**-24 + 2**-40, 3.4e38 * 1.5, 1e-50, -0.0], dtype=np.float64)
    with np.errstate(over="ignore"):  # 5.1e38 rounds to inf
        rn = x.astype(np.float32)
    assert run(spyre_libdevice.double2float_rn, torch.float32, x).tolist() == rn.tolist()
    rz = run(spyre_libdevice.double2float_rz, torch.float32, x)
    assert rz.tolist() == [1.0, -1.0, 1.0, float(np.finfo(np.float32).max), 0.0, -0.0]


def test_float_composites():
    x = np.array([-1.0, 0.0, 0.25, 1.0, 2.0, math.nan, math.inf, -math.inf], dtype=np.float32)
    sat = run(spyre_libdevice.saturatef, torch.float32, x)
    assert sat.tolist() == [0.0, 0.0, 0.25, 1.0, 1.0, 0.0, 1.0, 0.0]
    y = np.array([8.0, 27.0, -8.0, 0.001, 1e30], dtype=np.float32)
    np.testing.assert_allclose(run(spyre_libdevice.rcbrt, torch.float32, y), 1 / np.cbrt(y.astype(np.float64)), rtol=3e-7)
    a = np.array([3.0, 1e30, 1e-30, 0.0], dtype=np.float32)
    b = np.array([4.0, 1e30, 1e-30, 0.0], dtype=np.float32)
    np.testing.assert_allclose(run(spyre_libdevice.rhypot, torch.float32, a, b)[:3],
                               1 / np.hypot(a.astype(np.float64), b.astype(np.float64))[:3], rtol=3e-7)
    r = np.array([2.5, -2.5, 0.5, -0.5, 1.4999999, 1e10], dtype=np.float32)
    assert run(spyre_libdevice.llround, torch.int64, r).tolist() == [3, -3, 1, -1, 1, 10000000000]


@triton.jit
def norms(a_ptr, b_ptr, c_ptr, d_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b, c, d = tl.load(a_ptr + i), tl.load(b_ptr + i), tl.load(c_ptr + i), tl.load(d_ptr + i)
    tl.store(o_ptr + i, libdevice.norm3d(a, b, c))
    tl.store(o_ptr + N + i, libdevice.rnorm3d(a, b, c))
    tl.store(o_ptr + 2 * N + i, libdevice.norm4d(a, b, c, d))
    tl.store(o_ptr + 3 * N + i, libdevice.rnorm4d(a, b, c, d))


def test_norms_do_not_overflow():
    v = [np.array(c, dtype=np.float32) for c in ([1, 3e30, 2, 1e-30], [2, 4e30, 3, 2e-30], [2, 0, 6, 2e-30],
                                                 [4, 0, 0, 4e-30])]
    out = torch.empty(16, device=DEVICE)
    norms[(1,)](*[torch.from_numpy(c).to(DEVICE) for c in v], out, N=4)
    w = [c.astype(np.float64) for c in v]
    n3 = np.sqrt(w[0] ** 2 + w[1] ** 2 + w[2] ** 2)
    n4 = np.sqrt(w[0] ** 2 + w[1] ** 2 + w[2] ** 2 + w[3] ** 2)
    np.testing.assert_allclose(out.cpu().numpy(), np.concatenate([n3, 1 / n3, n4, 1 / n4]), rtol=5e-7)


# -- directed rounding: against exact rational arithmetic -------------------------------------------
def _neighbours(frac, np_t):
    """(largest value <= frac, smallest value >= frac) of float type np_t."""
    c = np_t(float(frac)) if np_t is np.float64 else np.float32(float(frac))
    if not np.isfinite(c):
        c = np_t(np.finfo(np_t).max) * np.sign(c)
    if Fraction(float(c)) > frac:
        return np.nextafter(c, np_t(-np.inf)), c
    if Fraction(float(c)) < frac:
        return c, np.nextafter(c, np_t(np.inf))
    return c, c


def _directed_ref(frac, np_t, mode):
    lo, hi = _neighbours(frac, np_t)
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    return lo if frac > 0 else hi


def _operands(np_t, n=48):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np_t)
    y = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np_t)
    # exact cases, ties and opposite signs
    x[:4] = [1.0, 3.0, -2.0, 1.5]
    y[:4] = [2.0 ** -30, 1.0, 2.0 ** -40, -1.5]
    return x, y


EXACT = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b}


@pytest.mark.parametrize("np_t", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rd", "ru"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_directed_rounding_arithmetic(op, mode, np_t):
    x, y = _operands(np_t)
    got = run(getattr(spyre_libdevice, f"{op}_{mode}"), torch.from_numpy(np.zeros(1, np_t)).dtype, x, y)
    want = [_directed_ref(EXACT[op](Fraction(float(a)), Fraction(float(b))), np_t, mode) for a, b in zip(x, y)]
    assert got.tolist() == [float(w) for w in want]


@pytest.mark.parametrize("np_t", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rd", "ru"])
def test_directed_sqrt_and_rcp(mode, np_t):
    x, _ = _operands(np_t)
    x = np.abs(x)
    got = run(getattr(spyre_libdevice, f"sqrt_{mode}"), torch.from_numpy(np.zeros(1, np_t)).dtype, x)
    for g, a in zip(got, x):
        lo, hi = _neighbours(Fraction(float(np.sqrt(np.float64(a)))), np_t)  # bracket, then decide exactly
        cands = sorted({float(lo), float(hi), float(np.nextafter(lo, -np.inf)), float(np.nextafter(hi, np.inf))})
        below = max(c for c in cands if Fraction(c) ** 2 <= Fraction(float(a)))
        above = min(c for c in cands if Fraction(c) ** 2 >= Fraction(float(a)))
        assert g == (above if mode == "ru" else below)
    got = run(getattr(spyre_libdevice, f"rcp_{mode}"), torch.from_numpy(np.zeros(1, np_t)).dtype, x)
    assert got.tolist() == [float(_directed_ref(1 / Fraction(float(a)), np_t, mode)) for a in x]


@pytest.mark.parametrize("mode", ["rz", "rd", "ru"])
def test_directed_fma_f32(mode):
    x, y = _operands(np.float32)
    z = (-x * y).astype(np.float32) + np.float32(2.0 ** -30)  # near-cancellation
    ts = [torch.from_numpy(a).to(DEVICE) for a in (x, y, z)]
    out = torch.empty(len(x), device=DEVICE)
    ternary[(1,)](*ts, out, len(x), FN=getattr(spyre_libdevice, f"fma_{mode}"), BLOCK=64)
    want = [_directed_ref(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), np.float32, mode)
            for a, b, c in zip(x, y, z)]
    assert out.cpu().tolist() == [float(w) for w in want]


def test_directed_overflow_gives_max_toward_zero():
    big = np.array([3e38, -3e38], dtype=np.float32)
    assert run(spyre_libdevice.add_rz, torch.float32, big, big).tolist() == [3.4028234663852886e+38,
                                                                          -3.4028234663852886e+38]
    assert run(spyre_libdevice.add_ru, torch.float32, big, big).tolist() == [math.inf, -3.4028234663852886e+38]


@triton.jit
def ternary(x_ptr, y_ptr, z_ptr, o_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, FN(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m),
                              tl.load(z_ptr + offs, mask=m)), mask=m)


@pytest.mark.parametrize("mode", ["rz", "rd", "ru"])
def test_directed_conversions_to_f32(mode):
    d = np.array([1 + 2**-30, -(1 + 2**-30), 1.0, 3e38 * 1.5, -1e-50, 0.1], dtype=np.float64)
    fns = [("int", ints(np.int32)), ("uint", ints(np.uint32))]
    if mode != "rz":
        fns.append(("double", d))
    for src, x in fns:
        got = run(getattr(spyre_libdevice, f"{src}2float_{mode}"), torch.float32, x)
        want = [float(_directed_ref(Fraction(float(v)) if src == "double" else Fraction(int(v)), np.float32, mode))
                for v in x]
        assert got.tolist() == want, src


@pytest.mark.parametrize("mode", ["rz", "rd", "ru"])
@pytest.mark.parametrize("src,ty", [("ll", np.int64), ("ull", np.uint64)])
@pytest.mark.parametrize("dst,np_t", [("float", np.float32), ("double", np.float64)])
def test_directed_64_bit_integer_conversions(src, ty, dst, np_t, mode):
    x = ints(ty)
    got = run(getattr(spyre_libdevice, f"{src}2{dst}_{mode}"), torch.from_numpy(np.zeros(1, np_t)).dtype, x)
    assert got.tolist() == [float(_directed_ref(Fraction(int(v)), np_t, mode)) for v in x]


@pytest.mark.parametrize("np_t,ity", [(np.float32, np.int32), (np.float64, np.int64)], ids=["f32", "f64"])
def test_ilogb_logb_scalbn(np_t, ity):
    tiny = np.finfo(np_t).smallest_subnormal
    x = np.array([1.0, 1.5, 2.0, 0.75, -8.0, 1e-3, tiny, tiny * 12, np.finfo(np_t).max, 0.0, -0.0, np.inf,
                  -np.inf, np.nan], dtype=np_t)
    got = run(spyre_libdevice.ilogb, torch.int32, x)
    finite = [int(np.frexp(v)[1]) - 1 if v != 0 and np.isfinite(v) else None for v in x]
    want = [f if f is not None else (-2**31 if (v == 0 or np.isnan(v)) else 2**31 - 1) for f, v in zip(finite, x)]
    assert got.tolist() == want
    lb = run(spyre_libdevice.logb, torch.from_numpy(np.zeros(1, np_t)).dtype, x)
    want_lb = [float(f) if f is not None else (-np.inf if v == 0 else np.abs(v)) for f, v in zip(finite, x)]
    np.testing.assert_array_equal(lb, np.array(want_lb, dtype=np_t))
    n = np.array([3, -2, 1, 10, -1, 0, 5, 1, 1, -3, 2, 0, 0, 0], dtype=np.int32)
    sc = run(spyre_libdevice.scalbn, torch.from_numpy(np.zeros(1, np_t)).dtype, x, n)
    with np.errstate(over="ignore", invalid="ignore"):
        np.testing.assert_array_equal(sc, np.ldexp(x, n))


def test_byte_perm():
    x, y = ints(np.int32, 16), ints(np.int32, 16)[::-1].copy()
    s = np.array(RNG.integers(0, 2**16, len(x)), dtype=np.int32)
    got = run3(spyre_libdevice.byte_perm, torch.int32, x, y, s)
    want = []
    for a, b, c in zip(x, y, s):
        v = ((int(b) & 0xFFFFFFFF) << 32) | (int(a) & 0xFFFFFFFF)
        r = sum(((v >> (((int(c) >> (4 * i)) & 7) * 8)) & 0xFF) << (8 * i) for i in range(4))
        want.append(((r + 2**31) % 2**32) - 2**31)
    assert got.tolist() == want


def run3(fn, out_dtype, x, y, z):
    ts = [torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE) for a in (x, y, z)]
    out = torch.empty(len(x), dtype=out_dtype, device=DEVICE)
    ternary[(1,)](*ts, out, len(x), FN=fn, BLOCK=triton.next_power_of_2(len(x)))
    return out.cpu().numpy()


@pytest.mark.parametrize("np_t", [np.float32, np.float64], ids=["f32", "f64"])
def test_erfcx_and_erfcinv(np_t):
    from scipy import special
    x = np.concatenate([np.linspace(-5, 5, 41), [10.0, 25.9, 26.1, 50.0, 1e3, 1e10, -26.0, np.inf, np.nan]]).astype(np_t)
    got = run(spyre_libdevice.erfcx, torch.from_numpy(np.zeros(1, np_t)).dtype, x)
    with np.errstate(over="ignore"):  # erfcx(-26) overflows f32
        ref = special.erfcx(x.astype(np.float64)).astype(np_t)
    np.testing.assert_allclose(got, ref, rtol=4e-7 if np_t is np.float32 else 2e-14)
    y = np.concatenate([np.linspace(0, 2, 33), [1e-30, 1e-10, 2 - 1e-7, -0.5, 2.5, np.nan]]).astype(np_t)
    got = run(spyre_libdevice.erfcinv, torch.from_numpy(np.zeros(1, np_t)).dtype, y)
    with np.errstate(invalid="ignore"):
        ref = special.erfcinv(y.astype(np.float64))
    np.testing.assert_allclose(got, ref.astype(np_t), rtol=4e-7 if np_t is np.float32 else 1e-13)


@pytest.mark.parametrize("np_t", [np.float32, np.float64], ids=["f32", "f64"])
def test_bessel_of_integer_order(np_t):
    from scipy import special
    n = np.array([0, 1, 2, 3, 5, 10, 20, 2, 7, 50, -3, -4, 3, 30, 1, 4] * 3, dtype=np.int32)
    x = np.array([0.5, 2.0, 10.0, 0.1, 3.0, 15.0, 25.0, -4.0, 7.5, 60.0, 2.5, 3.5, 1e-3, 5.0, 100.0, 0.0] * 3,
                 dtype=np_t) * np.repeat(np.array([1.0, 1.3, 0.7], dtype=np_t), 16)
    ts = [torch.from_numpy(a).to(DEVICE) for a in (n, x)]
    out = torch.empty(len(x), dtype=torch.from_numpy(np.zeros(1, np_t)).dtype, device=DEVICE)
    rtol = 2e-6 if np_t is np.float32 else 1e-11
    binary[(1,)](*ts, out, len(x), FN=spyre_libdevice.jn, BLOCK=64)
    np.testing.assert_allclose(out.cpu().numpy(), special.jv(n, x.astype(np.float64)).astype(np_t), rtol=rtol,
                               atol=1e-30)
    pos = x > 0
    binary[(1,)](*ts, out, len(x), FN=spyre_libdevice.yn, BLOCK=64)
    np.testing.assert_allclose(out.cpu().numpy()[pos], special.yn(n, x.astype(np.float64))[pos].astype(np_t),
                               rtol=rtol)


def test_yn_at_zero_and_below():
    n = np.array([0, 1, 2, 5, 3], dtype=np.int32)
    x = np.array([0.0, 0.0, 0.0, 0.0, -1.0], dtype=np.float64)
    ts = [torch.from_numpy(a).to(DEVICE) for a in (n, x)]
    out = torch.empty(5, dtype=torch.float64, device=DEVICE)
    binary[(1,)](*ts, out, 5, FN=spyre_libdevice.yn, BLOCK=8)
    got = out.cpu().numpy()
    assert (got[:4] == -np.inf).all() and np.isnan(got[4])
