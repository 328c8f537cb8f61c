"""The interpreter (`spyre_triton._runtime.Kernel`) against numpy, torch and scipy.

Programs are written directly with `tests/asm_helpers.Builder` (one instruction at a time) and run
on device memory from `_runtime.alloc`. Table-driven: every opcode, every dtype it takes, the
broadcast variants, edge values, and the failure modes (bounds, assertions, bad binaries, Ctrl-C).
"""
from __future__ import annotations

import math
from fractions import Fraction
import os
import signal
import struct
import sys
import threading
import time

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from asm_helpers import NP, Builder, DevBuf, const_bits, nbytes_of, run_elementwise  # noqa: E402

from spyre_triton import _runtime as rt  # noqa: E402
from spyre_triton import isa  # noqa: E402

RNG = np.random.default_rng(1234)
INTS = ["i1", "i8", "i16", "i32", "i64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


# ---------------------------------------------------------------------------------------------
# reference helpers
# ---------------------------------------------------------------------------------------------
def wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    if signed and bits > 1 and v >> (bits - 1):
        v -= 1 << bits
    return v


def tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def int_ref(op: str, a: int, b: int, t: str) -> int:
    bits = BITS[t]
    sa, sb = (-(a & 1), -(b & 1)) if t == "i1" else (wrap(a, bits, True), wrap(b, bits, True))
    ua, ub = wrap(a, bits, False), wrap(b, bits, False)
    r = {
        "add": lambda: ua + ub, "sub": lambda: ua - ub, "mul": lambda: ua * ub,
        "divs": lambda: 0 if sb == 0 else tdiv(sa, sb),
        "rems": lambda: 0 if sb == 0 else sa - sb * tdiv(sa, sb),
        "divu": lambda: 0 if ub == 0 else ua // ub, "remu": lambda: 0 if ub == 0 else ua % ub,
        "and": lambda: ua & ub, "or": lambda: ua | ub, "xor": lambda: ua ^ ub,
        "shl": lambda: 0 if ub >= bits else ua << ub,
        "shrs": lambda: sa >> min(ub, bits - 1),
        "shru": lambda: 0 if ub >= bits else ua >> ub,
        "maxs": lambda: max(sa, sb), "mins": lambda: min(sa, sb), "maxu": lambda: max(ua, ub),
        "minu": lambda: min(ua, ub),
        "mulhis": lambda: (sa * sb) >> bits, "mulhiu": lambda: (ua * ub) >> bits,
    }[op]()
    return wrap(r, bits, t != "i1")


def int_edges(t: str) -> list[int]:
    bits = BITS[t]
    if t == "i1":
        return [0, 1]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    vals = [0, 1, -1, 2, -2, 3, 7, -7, bits - 1, bits, bits + 1, lo, hi, lo + 1, hi - 1, 100 % (hi + 1)]
    return sorted(set(wrap(v, bits, True) for v in vals))


def int_pairs(t: str):
    e = int_edges(t)
    a = [x for x in e for _ in e]
    b = [y for _ in e for y in e]
    bits = BITS[t]
    rnd = RNG.integers(-(1 << min(bits - 1, 62)), 1 << min(bits - 1, 62), size=(2, 64)) if t != "i1" else \
        RNG.integers(0, 2, size=(2, 64))
    a += [int(v) for v in rnd[0]]
    b += [int(v) for v in rnd[1]]
    return np.array(a, dtype=NP[t]), np.array(b, dtype=NP[t])


def f32_of(arr: np.ndarray, t: str) -> np.ndarray:
    """Storage of dtype t -> float32 (float64 for f64) values."""
    if t == "f16":
        return arr.astype(np.float32)
    if t == "bf16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    if t == "f32":
        return arr.astype(np.float32)
    return arr.astype(np.float64)


def store_of(vals: np.ndarray, t: str) -> np.ndarray:
    """float32/float64 values -> storage of dtype t, rounding to nearest even."""
    if t == "f16":
        with np.errstate(over="ignore"):
            return vals.astype(np.float16)
    if t == "bf16":
        return torch.from_numpy(np.ascontiguousarray(vals, dtype=np.float32)).to(torch.bfloat16).view(
            torch.int16).numpy().view(np.uint16)
    if t == "f32":
        return vals.astype(np.float32)
    return vals.astype(np.float64)


def float_edges(t: str) -> np.ndarray:
    v = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3, -7.25, np.inf, -np.inf, np.nan, 65504.0, 1e-6, 6e-8, 1e30,
         -1e-30, 3.4e38]
    if t == "f64":
        v += [1e300, -1e-310, 2.0 ** -1074]
    return store_of(np.array(v, dtype=np.float64 if t == "f64" else np.float32), t)


def float_pairs(t: str):
    e = float_edges(t)
    a = np.repeat(e, len(e))
    b = np.tile(e, len(e))
    rnd = store_of((RNG.standard_normal((2, 64)) * 10).astype(np.float64 if t == "f64" else np.float32), t)
    return np.concatenate([a, rnd[0]]), np.concatenate([b, rnd[1]])


def bits_of(arr: np.ndarray) -> np.ndarray:
    return arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.itemsize])


def assert_float_same(got, exp, t, zero_sign=True, ctx=""):
    """Bit-exact except that any NaN matches any NaN (and ±0 match when zero_sign is False)."""
    g, e = f32_of(got, t).astype(np.float64), f32_of(exp, t).astype(np.float64)
    gn, en = np.isnan(g), np.isnan(e)
    assert (gn == en).all(), f"{ctx}: NaN mismatch at {np.nonzero(gn != en)[0][:8]}"
    ok = ~gn
    if zero_sign:
        bad = bits_of(got)[ok] != bits_of(exp)[ok]
    else:
        bad = g[ok] != e[ok]
    idx = np.nonzero(ok)[0][bad]
    assert not bad.any(), f"{ctx}: {len(idx)} mismatches, first at {idx[:5]}: got {g[idx[:5]]} expected {e[idx[:5]]}"


# ---------------------------------------------------------------------------------------------
# integer binary ops
# ---------------------------------------------------------------------------------------------
INT_BINOPS = ["add", "sub", "mul", "divs", "divu", "rems", "remu", "and", "or", "xor", "shl", "shrs", "shru",
              "maxs", "mins", "maxu", "minu", "mulhis", "mulhiu"]


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", INT_BINOPS)
def test_int_binary(op, t):
    a, b = int_pairs(t)
    got = run_elementwise(op, t, [a, b])
    exp = np.array([int_ref(op, int(x), int(y), t) for x, y in zip(a, b)], dtype=NP[t])
    bad = np.nonzero(got != exp)[0]
    assert len(bad) == 0, f"{op}.{t}: a={a[bad[:4]]} b={b[bad[:4]]} got {got[bad[:4]]} expected {exp[bad[:4]]}"


@pytest.mark.parametrize("variant", [(), (1,), (2,), (1, 2)])
@pytest.mark.parametrize("t", ["i8", "i32", "i64", "f16", "f32"])
def test_binary_broadcast_variants(t, variant):
    n = 37
    a = (np.arange(n) * 3 - 20).astype(NP[t]) if t[0] == "i" else store_of(np.linspace(-3, 5, n), t)
    b = (np.arange(n) * 7 + 1).astype(NP[t]) if t[0] == "i" else store_of(np.linspace(1, 2, n), t)
    ins = [a[:1] if 1 in variant else a, b[:1] if 2 in variant else b]
    got = run_elementwise("sub", t, ins, bcast=variant, n=n)
    if t[0] == "i":
        ea = np.broadcast_to(ins[0], n).astype(np.int64)
        eb = np.broadcast_to(ins[1], n).astype(np.int64)
        exp = np.array([wrap(int(x - y), BITS[t], True) for x, y in zip(ea, eb)], dtype=NP[t])
        assert (got == exp).all()
    else:
        exp = store_of(np.broadcast_to(f32_of(ins[0], t), n) - np.broadcast_to(f32_of(ins[1], t), n), t)
        assert_float_same(got, exp, t)


# ---------------------------------------------------------------------------------------------
# float binary ops
# ---------------------------------------------------------------------------------------------
def _maximum(x, y):
    r = np.where(x > y, x, y)
    r = np.where((x == y) & (x == 0), np.where(np.signbit(x) & np.signbit(y), x, np.abs(x)), r)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, r)


def _minimum(x, y):
    r = np.where(x < y, x, y)
    r = np.where((x == y) & (x == 0), np.where(np.signbit(x) | np.signbit(y), -np.abs(x), x), r)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, r)


FLOAT_BINOPS = {
    "add": (np.add, True), "sub": (np.subtract, True), "mul": (np.multiply, True), "divf": (np.divide, True),
    "remf": (np.fmod, True), "maxnumf": (np.fmax, False), "minnumf": (np.fmin, False),
    "maximumf": (_maximum, True), "minimumf": (_minimum, True),
}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", list(FLOAT_BINOPS))
def test_float_binary(op, t):
    a, b = float_pairs(t)
    got = run_elementwise(op, t, [a, b])
    fn, zero_sign = FLOAT_BINOPS[op]
    with np.errstate(all="ignore"):
        exp = store_of(fn(f32_of(a, t), f32_of(b, t)), t)
    assert_float_same(got, exp, t, zero_sign=zero_sign, ctx=f"{op}.{t}")


@pytest.mark.parametrize("op", ["divf", "remf", "maxnumf", "cmpf", "fma", "clamp", "math1"])
def test_float_ops_reject_ints(op):
    b = Builder()
    b.emit(op, "i32", a=b.x(0), b=b.x(64), c=b.x(128), d=b.x(192), n=4) if op in ("fma", "clamp") else \
        b.emit(op, "i32", a=b.x(0), b=b.x(64), **({} if op == "math1" else {"c": b.x(128)}), n=4)
    with pytest.raises(ValueError, match="not supported for dtype i32"):
        b.build()


@pytest.mark.parametrize("op", ["divs", "shl", "and", "absi", "ctpop", "cmpi"])
def test_int_ops_reject_floats(op):
    b = Builder()
    b.emit(op, "f32", a=b.x(0), b=b.x(64), **({} if op in ("absi", "ctpop") else {"c": b.x(128)}), n=4)
    with pytest.raises(ValueError, match="not supported for dtype f32"):
        b.build()


# ---------------------------------------------------------------------------------------------
# comparisons
# ---------------------------------------------------------------------------------------------
ICMP = {"eq": ("u", np.equal), "ne": ("u", np.not_equal), "slt": ("s", np.less), "sle": ("s", np.less_equal),
        "sgt": ("s", np.greater), "sge": ("s", np.greater_equal), "ult": ("u", np.less),
        "ule": ("u", np.less_equal), "ugt": ("u", np.greater), "uge": ("u", np.greater_equal)}


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("pred", list(ICMP))
def test_cmpi(pred, t):
    a, b = int_pairs(t)
    got = run_elementwise("cmpi", t, [a, b], out_t="i1", flags={"pred": pred})
    kind, fn = ICMP[pred]
    if t == "i1":
        ca, cb = (a.astype(np.int64), b.astype(np.int64)) if kind == "u" else (-a.astype(np.int64), -b.astype(np.int64))
    else:
        ca, cb = (a, b) if kind == "s" else (bits_of(a), bits_of(b))
    assert (got == fn(ca, cb).astype(np.uint8)).all()


FCMP = {
    "false": lambda x, y: np.zeros_like(x, dtype=bool), "oeq": np.equal, "ogt": np.greater,
    "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal,
    "one": lambda x, y: (x < y) | (x > y), "ord": lambda x, y: ~(np.isnan(x) | np.isnan(y)),
    "ueq": lambda x, y: ~((x < y) | (x > y)), "ugt": lambda x, y: ~(x <= y), "uge": lambda x, y: ~(x < y),
    "ult": lambda x, y: ~(x >= y), "ule": lambda x, y: ~(x > y), "une": np.not_equal,
    "uno": lambda x, y: np.isnan(x) | np.isnan(y), "true": lambda x, y: np.ones_like(x, dtype=bool),
}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("pred", list(FCMP))
def test_cmpf(pred, t):
    a, b = float_pairs(t)
    got = run_elementwise("cmpf", t, [a, b], out_t="i1", flags={"pred": pred})
    with np.errstate(invalid="ignore"):
        exp = FCMP[pred](f32_of(a, t), f32_of(b, t)).astype(np.uint8)
    assert (got == exp).all(), np.nonzero(got != exp)


# ---------------------------------------------------------------------------------------------
# select / fma / clamp / integer unary ops
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", range(8))
@pytest.mark.parametrize("t", ["i1", "i8", "f16", "f32", "i64"])
def test_select_variants(t, variant):
    n = 29
    cond = (RNG.integers(0, 2, n)).astype(np.uint8)
    a = RNG.integers(0, 2 if t == "i1" else 100, n).astype(NP[t])
    b = RNG.integers(0, 2 if t == "i1" else 100, n).astype(NP[t])
    bc = tuple(i + 1 for i in range(3) if variant >> i & 1)
    ins = [x[:1] if i + 1 in bc else x for i, x in enumerate([cond, a, b])]
    got = run_elementwise("select", t, ins, bcast=bc, n=n)
    c, x, y = (np.broadcast_to(v, n) for v in ins)
    assert (got == np.where(c == 1, x, y)).all()


@pytest.mark.parametrize("variant", [0, 1, 2, 4, 5, 7])
@pytest.mark.parametrize("t", FLOATS)
def test_fma(t, variant):
    n = 33
    vals = [store_of(RNG.standard_normal(n), t) for _ in range(3)]
    bc = tuple(i + 1 for i in range(3) if variant >> i & 1)
    ins = [x[:1] if i + 1 in bc else x for i, x in enumerate(vals)]
    got = run_elementwise("fma", t, ins, bcast=bc, n=n)
    x, y, z = (np.broadcast_to(f32_of(v, t), n).astype(np.float64) for v in ins)
    exact = np.array([float(Fraction(p) * Fraction(q) + Fraction(r)) for p, q, r in zip(x, y, z)])
    if t == "f64":
        assert_float_same(got, exact, t)
    elif t == "f32":
        assert_float_same(got, exact.astype(np.float32), t)
    else:  # fmaf in f32, then rounded to the half type
        assert_float_same(got, store_of(exact.astype(np.float32), t), t)


@pytest.mark.parametrize("propagate", [0, 1])
@pytest.mark.parametrize("t", FLOATS)
def test_clamp(t, propagate):
    x = store_of(np.array([-5, -1, 0, 0.5, 1, 3, np.nan, np.inf, -np.inf, 2]), t)
    lo = store_of(np.array([-1.0]), t)
    hi = store_of(np.array([2.0]), t)
    got = f32_of(run_elementwise("clamp", t, [x, lo, hi], bcast=(2, 3), flags={"propagate_nan": propagate}), t)
    exp = np.clip(f32_of(x, t), -1, 2)
    exp[6] = np.nan if propagate else -1.0
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("op", ["absi", "ctpop", "ctlz", "cttz"])
def test_int_unary(op, t):
    a = np.array(int_edges(t) + [int(v) for v in RNG.integers(-100, 100, 20)] if t != "i1" else [0, 1, 1, 0],
                 dtype=np.int64).astype(NP[t])
    got = run_elementwise(op, t, [a])
    bits = BITS[t]

    def ref(v):
        u = wrap(int(v), bits, False)
        s = -(u & 1) if t == "i1" else wrap(u, bits, True)
        r = {"absi": abs(s), "ctpop": bin(u).count("1"),
             "ctlz": bits - u.bit_length(),
             "cttz": bits if u == 0 else (u & -u).bit_length() - 1}[op]
        return wrap(r, bits, t != "i1")
    assert (got == np.array([ref(v) for v in a], dtype=NP[t])).all()


def test_unary_broadcast_fills():
    got = run_elementwise("ctpop", "i32", [np.array([0x0F0F], dtype=np.int32), np.zeros(9, np.int32)][:1],
                          bcast=(1,))
    assert list(got) == [8]
    # bc1 with n > 1: compute one element, fill n
    b = Builder()
    out = DevBuf(64)
    b.arg("o", "ptr", "i32", b.s(0))
    k = b.const(-7)
    b.emit("const", "i32", a=b.x(0), b=k, n=1)
    b.emit("absi", "i32", a=b.x(64), b=b.x(0), n=12, flags={"bc1": 1})
    b.emit("st", "i32", a=b.s(0), b=b.desc([12], [4]), c=b.x(64))
    b.build().launch(0, 1, 1, 1, (out,))
    assert list(out.view(np.int32, 12)) == [7] * 12
    out.free()


# ---------------------------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------------------------
# (exponent bits, mantissa bits, bias, kind) as in runtime/fp.h; kind: ieee | fn | fnuz
FMT = {"f16": (5, 10, 15, "ieee"), "bf16": (8, 7, 127, "ieee"), "f32": (8, 23, 127, "ieee"),
       "f8e4m3fn": (4, 3, 7, "fn"), "f8e5m2": (5, 2, 15, "ieee"), "f8e4m3fnuz": (4, 3, 8, "fnuz"),
       "f8e5m2fnuz": (5, 2, 16, "fnuz"), "f8e4m3b15": (4, 3, 15, "fn")}
FP8 = ["f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b15"]
TORCH_FP8 = {"f8e4m3fn": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
             "f8e4m3fnuz": torch.float8_e4m3fnuz, "f8e5m2fnuz": torch.float8_e5m2fnuz}


def fmt_max(t):
    e, m, bias, kind = FMT[t]
    emax = (1 << e) - 2 if kind == "ieee" else (1 << e) - 1
    mmax = (1 << m) - 1 - (1 if kind == "fn" else 0)
    return Fraction(2) ** (emax - bias) * (1 + Fraction(mmax, 1 << m))


def ref_decode(bits: int, t: str) -> float:
    e, m, bias, kind = FMT[t]
    nb = 1 + e + m
    s, ex, man = bits >> (nb - 1) & 1, bits >> m & ((1 << e) - 1), bits & ((1 << m) - 1)
    if kind == "fnuz" and s and ex == 0 and man == 0:
        return math.nan
    if kind == "ieee" and ex == (1 << e) - 1:
        return math.nan if man else (-math.inf if s else math.inf)
    if kind == "fn" and ex == (1 << e) - 1 and man == (1 << m) - 1:
        return math.nan
    v = Fraction(man, 1 << m) * Fraction(2) ** (1 - bias) if ex == 0 else \
        (1 + Fraction(man, 1 << m)) * Fraction(2) ** (ex - bias)
    return -float(v) if s else float(v)


def ref_encode(x, t: str, rtz: bool = False) -> int:
    """Exact-arithmetic rounding of x (float or int) to format t; the documented overflow rules."""
    e, m, bias, kind = FMT[t]
    nb = 1 + e + m
    sbit = 1 << (nb - 1)
    inf_code = ((1 << e) - 1) << m
    emaxf = (1 << e) - 2 if kind == "ieee" else (1 << e) - 1
    maxcode = emaxf << m | ((1 << m) - 1 - (1 if kind == "fn" else 0))
    if isinstance(x, float) and math.isnan(x):
        return {"ieee": inf_code | 1 << (m - 1), "fn": sbit - 1, "fnuz": sbit}[kind] | (
            sbit if kind != "fnuz" and math.copysign(1, x) < 0 else 0)
    neg = (x < 0) or (isinstance(x, float) and x == 0 and math.copysign(1, x) < 0)
    sign = sbit if neg else 0
    if isinstance(x, float) and math.isinf(x):
        return sign | (inf_code if kind == "ieee" else maxcode)
    a = abs(Fraction(x))
    if a == 0:
        return 0 if kind == "fnuz" else sign
    E = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** E > a:
        E -= 1
    E = max(E, 1 - bias)
    q = Fraction(2) ** (E - m)
    mi = math.floor(a / q) if rtz else round(a / q)  # round(): half to even
    if mi * q > fmt_max(t):
        return sign | (inf_code if kind == "ieee" and not rtz else maxcode)
    if mi == 0:
        return 0 if kind == "fnuz" else sign
    if mi >> (m + 1):
        mi >>= 1
        E += 1
    if mi < 1 << m:
        return sign | mi
    return sign | (E + bias) << m | (mi - (1 << m))


def storage_values(t: str) -> np.ndarray:
    """Test inputs of dtype t as storage: every pattern for 8/16-bit floats, edges + random otherwise."""
    if t in FP8:
        return np.arange(256, dtype=np.uint8)
    if t == "f16":
        return np.arange(65536, dtype=np.uint16).view(np.float16)
    if t == "bf16":
        return np.arange(65536, dtype=np.uint16)
    v = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 448.0, 464.0, 480.0, 57344.0, 61440.0, 65504.0,
         65520.0, 240.0, 1.75, 1.875, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17, 2.0 ** -16, 2.0 ** -24, 2.0 ** -25,
         2.0 ** -133, 3.4e38, 1.0000001, 1 + 2.0 ** -11, -(1 + 2.0 ** -11), 1 + 3 * 2.0 ** -11]
    if t == "f64":
        v += [1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -24 + 2.0 ** -60, 1e300, -1e-300, 2.0 ** -1074, 1e39]
    r = RNG.standard_normal(512) * np.exp2(RNG.integers(-30, 30, 512))
    return np.concatenate([np.array(v), r]).astype(NP[t])


def values_of(arr: np.ndarray, t: str) -> list:
    if t in FP8:
        return [ref_decode(int(b), t) for b in arr]
    return [float(v) for v in f32_of(arr, t)]


@pytest.mark.parametrize("src", FLOATS + FP8)
@pytest.mark.parametrize("dst", FLOATS + FP8)
def test_cvt_float_float(src, dst):
    a = storage_values(src)
    if len(a) > 4096:  # every 16-bit pattern against the fast path; an exact reference on a sample
        sample = np.concatenate([a[::61], a[0x7BF0:0x7C10], a[0xFBF0:0xFC10]])
    else:
        sample = a
    vals = values_of(sample, src)
    for mode in ("rtne", "rtz"):
        got = run_elementwise("cvt", dst, [sample], t2=src, flags={"mode": mode})
        if dst == "f64":
            exp = np.array(vals, dtype=np.float64)
        else:
            exp = np.array([ref_encode(v, dst, mode == "rtz") for v in vals], dtype=np.uint64).astype(
                {1: np.uint8, 2: np.uint16, 4: np.uint32}[nbytes_of(dst)])
            exp = exp.view(NP[dst]) if dst in ("f16", "f32") else exp
        assert_float_same(got, exp, dst if dst not in FP8 else "bf16", ctx=f"{src}->{dst} {mode}") \
            if dst not in FP8 else _assert_fp8_same(got, exp, dst, f"{src}->{dst} {mode}")


def _assert_fp8_same(got, exp, t, ctx):
    gn = np.array([math.isnan(ref_decode(int(b), t)) for b in got])
    en = np.array([math.isnan(ref_decode(int(b), t)) for b in exp])
    assert (gn == en).all(), ctx
    bad = np.nonzero((got != exp) & ~gn)[0]
    assert len(bad) == 0, f"{ctx}: got {got[bad[:5]]} expected {exp[bad[:5]]}"


@pytest.mark.parametrize("src", ["f16", "bf16", "f32"])
def test_cvt_f16_f32_fast_paths_all_patterns(src):
    """Every f16 / bf16 pattern through the vectorised conversions, against numpy / torch."""
    a = np.arange(65536, dtype=np.uint16)
    if src == "f16":
        a = a.view(np.float16)
        got = run_elementwise("cvt", "f32", [a], t2="f16", flags={"mode": "fpext"})
        assert_float_same(got, a.astype(np.float32), "f32")
        back = run_elementwise("cvt", "f16", [got], t2="f32", flags={"mode": "rtne"})
        assert_float_same(back, a, "f16")
    elif src == "bf16":
        got = run_elementwise("cvt", "f32", [a], t2="bf16", flags={"mode": "fpext"})
        assert_float_same(got, f32_of(a, "bf16"), "f32")
    else:  # f32 -> f16 / bf16 rtne on random f32 bit patterns vs numpy / torch
        r = RNG.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
        r = np.concatenate([r, (np.arange(65536, dtype=np.uint32) << 13).view(np.float32)])
        for dst in ("f16", "bf16"):
            got = run_elementwise("cvt", dst, [r], t2="f32", flags={"mode": "rtne"})
            assert_float_same(got, store_of(r, dst), dst, ctx=f"f32->{dst}")


@pytest.mark.parametrize("dst", list(TORCH_FP8))
def test_cvt_fp8_vs_torch(dst):
    """f32 -> fp8 (rtne) and fp8 -> f32 bit-exact against torch for every in-range value; outside the
    range the ISA saturates fn/fnuz types (torch gives NaN for fnuz) and overflows e5m2 to inf."""
    x = np.concatenate([(np.arange(65536, dtype=np.uint16)).view(np.float16).astype(np.float32),
                        RNG.standard_normal(4000).astype(np.float32) * 100])
    got = run_elementwise("cvt", dst, [x], t2="f32", flags={"mode": "rtne"})
    ref = torch.from_numpy(x).to(TORCH_FP8[dst]).view(torch.uint8).numpy()
    mx = float(fmt_max(dst))
    inrange = (np.abs(x) <= mx) | np.isnan(x)
    nan = np.isnan(x)
    assert (got[inrange & ~nan] == ref[inrange & ~nan]).all()
    assert all(math.isnan(ref_decode(int(b), dst)) for b in got[nan])
    over = ~inrange
    dec = np.array([ref_decode(int(b), dst) for b in got[over]])
    if dst == "f8e5m2":
        big = np.abs(x[over]) >= 61440
        assert (np.isinf(dec[big])).all() and (np.abs(dec[~big]) == mx).all()
    else:
        assert (np.abs(dec) == mx).all() and (np.sign(dec) == np.sign(x[over])).all()
    # decode every pattern
    codes = np.arange(256, dtype=np.uint8)
    dec = run_elementwise("cvt", "f32", [codes], t2=dst, flags={"mode": "fpext"})
    tref = torch.from_numpy(codes).view(TORCH_FP8[dst]).float().numpy()
    assert_float_same(dec, tref, "f32")


@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("dst", INTS)
def test_cvt_int_int(src, dst):
    a = np.array(int_edges(src), dtype=np.int64).astype(NP[src])
    for mode in ("sext", "zext"):
        got = run_elementwise("cvt", dst, [a], t2=src, flags={"mode": mode})
        def ref(v):
            u = wrap(int(v), BITS[src], False)
            s = -u if src == "i1" else wrap(u, BITS[src], True)
            return wrap(s if mode == "sext" else u, BITS[dst], dst != "i1")
        assert (got == np.array([ref(v) for v in a], dtype=NP[dst])).all(), mode


@pytest.mark.parametrize("src", INTS)
@pytest.mark.parametrize("dst", FLOATS + ["f8e4m3fn", "f8e5m2"])
def test_cvt_int_to_float(src, dst):
    e = int_edges(src)
    if src == "i64":
        e += [(1 << 53) + 1, (1 << 60) + (1 << 36) + 1, -(1 << 62) - (1 << 38) - 1, (1 << 24) + 1]
    a = np.array(e, dtype=np.int64).astype(NP[src])
    for mode in ("sitofp", "uitofp"):
        got = run_elementwise("cvt", dst, [a], t2=src, flags={"mode": mode})
        vals = [(-(int(v) & 1) if src == "i1" else int(v)) if mode == "sitofp" else wrap(int(v), BITS[src], False)
                for v in a]
        if dst == "f64":
            exp = np.array([float(v) for v in vals])
        else:
            bits = [ref_encode(v, dst) for v in vals]
            exp = np.array(bits, dtype=np.uint64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[nbytes_of(dst)])
        assert (bits_of(got) == bits_of(exp.view(got.dtype) if dst != "f64" else exp)).all(), (mode, got, exp)


@pytest.mark.parametrize("src", FLOATS + ["f8e4m3fn", "f8e5m2fnuz"])
@pytest.mark.parametrize("dst", INTS)
def test_cvt_float_to_int(src, dst):
    v = [0.0, -0.0, 0.7, -0.7, 1.5, -1.5, 2.9, -2.9, 100.4, -100.4, 127.9, 128.5, -128.9, 255.9, 256.2, 3e4,
         -3e4, 65504.0, 4e9, -4e9, 1e19, -1e19, 1e30, math.inf, -math.inf, math.nan]
    if src in FP8:
        a = np.array([ref_encode(x, src) for x in v], dtype=np.uint8)
    else:
        a = store_of(np.array(v, dtype=np.float64 if src == "f64" else np.float32), src)
    vals = values_of(a, src)
    bits = BITS[dst]
    for mode in ("fptosi", "fptoui"):
        got = run_elementwise("cvt", dst, [a], t2=src, flags={"mode": mode})
        lo, hi = ((-1, 0) if dst == "i1" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)) if mode == "fptosi" \
            else (0, (1 << bits) - 1)
        exp = [0 if math.isnan(x) else min(max(int(x) if math.isfinite(x) else (hi if x > 0 else lo), lo), hi)
               for x in vals]
        exp = np.array([wrap(x, bits, dst != "i1") for x in exp], dtype=NP[dst])
        assert (got == exp).all(), (mode, vals, got, exp)


@pytest.mark.parametrize("src", ["i1", "i8", "i32", "i64", "f16", "bf16", "f32", "f64", "f8e4m3fn"])
def test_cvt_bool(src):
    if src[0] == "i":
        a = np.array(int_edges(src), dtype=np.int64).astype(NP[src])
        exp = (a != 0).astype(np.uint8)
    else:
        v = [0.0, -0.0, 1.0, -2.0, math.nan, math.inf, 1e-3]
        a = np.array([ref_encode(x, src) for x in v], dtype=np.uint8) if src in FP8 else store_of(np.array(v), src)
        exp = np.array([1 if x != 0 else 0 for x in v], dtype=np.uint8)
        exp[4] = 1
    got = run_elementwise("cvt", "i1", [a], t2=src, flags={"mode": "bool"})
    assert (got == exp).all()


@pytest.mark.parametrize("mode,t,t2", [("sext", "f32", "i32"), ("sitofp", "i32", "f32"), ("fptosi", "f32", "i32"),
                                       ("rtne", "i32", "i64"), ("bool", "f32", "i32")])
def test_cvt_rejects_bad_pairs(mode, t, t2):
    b = Builder()
    b.emit("cvt", t, t2, a=b.x(0), b=b.x(64), n=4, flags={"mode": mode})
    with pytest.raises(ValueError, match="cannot convert"):
        b.build()


def test_cvt_broadcast():
    got = run_elementwise("cvt", "f16", [np.array([2.5], np.float32)], t2="f32", flags={"mode": "rtne"}, bcast=(1,),
                          n=9)
    assert (got == np.float16(2.5)).all() and len(got) == 9
    got = run_elementwise("cvt", "f8e4m3fn", [np.array([2.5], np.float64)], t2="f64", flags={"mode": "rtne"},
                          bcast=(1,), n=5)
    assert (got == ref_encode(2.5, "f8e4m3fn")).all()


# ---------------------------------------------------------------------------------------------
# SFU: math1 / math2
# ---------------------------------------------------------------------------------------------
import scipy.special as sps  # noqa: E402

_X = np.array([-3.7, -2.5, -1.0, -0.5, -0.1, 0.0, 0.1, 0.3, 0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.7, 10.0, -10.0, 0.25, 0.75])
_POS = np.array([1e-3, 0.1, 0.5, 1.0, 1.5, 2.0, 3.3, 10.0, 123.0])
_UNIT = np.array([-0.999, -0.9, -0.5, -0.1, 0.0, 0.2, 0.6, 0.95])
_P = np.array([1e-10, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1 - 1e-7])
MATH1 = {
    "exp": (np.exp, _X), "exp2": (np.exp2, _X), "log": (np.log, _POS), "log2": (np.log2, _POS),
    "log10": (np.log10, _POS), "log1p": (np.log1p, np.concatenate([_POS, _UNIT])), "expm1": (np.expm1, _X),
    "sqrt": (np.sqrt, _POS), "rsqrt": (lambda x: 1 / np.sqrt(x), _POS), "cbrt": (np.cbrt, _X),
    "sin": (np.sin, _X), "cos": (np.cos, _X), "tan": (np.tan, _X), "asin": (np.arcsin, _UNIT),
    "acos": (np.arccos, _UNIT), "atan": (np.arctan, _X), "sinh": (np.sinh, _X), "cosh": (np.cosh, _X),
    "tanh": (np.tanh, _X), "asinh": (np.arcsinh, _X), "acosh": (np.arccosh, 1 + _POS), "atanh": (np.arctanh, _UNIT),
    "erf": (sps.erf, _X), "erfc": (sps.erfc, _X), "erfinv": (sps.erfinv, _UNIT), "lgamma": (sps.gammaln, _POS),
    "tgamma": (sps.gamma, _POS), "floor": (np.floor, _X), "ceil": (np.ceil, _X), "trunc": (np.trunc, _X),
    "round": (lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), _X), "rint": (np.rint, _X), "abs": (np.abs, _X),
    "neg": (np.negative, _X), "rcp": (lambda x: 1 / x, _POS), "signbit": (lambda x: np.signbit(x).astype(float), _X),
    "isnan": (lambda x: np.isnan(x).astype(float), np.array([0.0, np.nan, np.inf, 1.0])),
    "isinf": (lambda x: np.isinf(x).astype(float), np.array([0.0, np.nan, np.inf, -np.inf, 1.0])),
    "isfinite": (lambda x: np.isfinite(x).astype(float), np.array([0.0, np.nan, np.inf, -np.inf, 1.0])),
    "j0": (sps.j0, _X), "j1": (sps.j1, _X), "y0": (sps.y0, _POS), "y1": (sps.y1, _POS),
    "normcdf": (sps.ndtr, _X), "normcdfinv": (sps.ndtri, _P), "exp10": (lambda x: 10.0 ** x, _X),
    "sinpi": (lambda x: np.sin(np.pi * x), _X), "cospi": (lambda x: np.cos(np.pi * x), _X),
    "nearbyint": (np.rint, _X),
}
TOL = {"f16": 2e-3, "bf16": 1.6e-2, "f32": 2e-6, "f64": 1e-13}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("fn", list(MATH1))
def test_math1(fn, t):
    ref, x = MATH1[fn]
    a = store_of(x.astype(np.float64 if t == "f64" else np.float32), t)
    got = f32_of(run_elementwise("math1", t, [a], flags={"fn": fn}), t).astype(np.float64)
    with np.errstate(all="ignore"):
        exp = ref(f32_of(a, t).astype(np.float64))
        exp = f32_of(store_of(exp.astype(np.float64 if t == "f64" else np.float32), t), t).astype(np.float64)
    tol = TOL[t] * (10 if fn in ("tgamma", "lgamma", "erfinv", "normcdfinv", "y0", "y1", "j0", "j1", "tan") and t == "f32"
                    else 1)
    np.testing.assert_allclose(got, exp, rtol=tol, atol=tol, equal_nan=True, err_msg=f"{fn}.{t}")


MATH2 = {
    "pow": np.power, "atan2": np.arctan2, "fmod": np.fmod, "remainder": np.vectorize(math.remainder),
    "hypot": np.hypot, "copysign": np.copysign, "fdim": lambda a, b: np.maximum(a - b, 0),
    "ldexp": lambda a, b: np.where(np.isnan(b), np.nan, np.ldexp(a, np.nan_to_num(b).astype(int))), "fmaxnum": np.fmax, "fminnum": np.fmin,
}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("fn", list(MATH2) + ["nextafter"])
def test_math2(fn, t):
    a = np.array([0.5, 1.5, 2.0, 3.0, -2.5, 7.25, 0.0, 10.0, np.nan, 1.0, -3.0])
    b = np.array([2.0, -1.0, 0.5, 3.0, 1.5, -2.0, 1.0, 3.0, 1.0, np.nan, 4.0])
    A, B = (store_of(v.astype(np.float64 if t == "f64" else np.float32), t) for v in (a, b))
    got = run_elementwise("math2", t, [A, B], flags={"fn": fn})
    if fn == "nextafter":  # steps in the dtype's own representation
        if t == "bf16":
            exp = np.array([(x + 1 if (fx < fy) == (fx > 0) else x - 1) if fx == fx and fy == fy and fx != fy and fx != 0
                            else (x if fx != fx else (y if fy != fy or fx == fy else (y & 0x8000) | 1))
                            for x, y, fx, fy in zip(A, B, f32_of(A, t), f32_of(B, t))], dtype=np.uint16)
        else:
            exp = np.nextafter(A, B)
        assert_float_same(got, exp, t)
        return
    with np.errstate(all="ignore"):
        exp = MATH2[fn](f32_of(A, t).astype(np.float64), f32_of(B, t).astype(np.float64))
    np.testing.assert_allclose(f32_of(got, t).astype(np.float64), exp, rtol=TOL[t], atol=TOL[t], equal_nan=True)


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------
INT_RED = {"add": lambda x, ax: np.add.reduce(x, ax), "mul": lambda x, ax: np.multiply.reduce(x, ax),
           "maxs": lambda x, ax: x.max(ax), "mins": lambda x, ax: x.min(ax), "and": np.bitwise_and.reduce,
           "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}


def run_red(op, t, src, outer, length, inner):
    b = Builder("red", lx_bytes=1 << 20)
    sb = DevBuf.of(src, pad=8)
    out = DevBuf(outer * inner * nbytes_of(t) + 8)
    b.arg("s", "ptr", "i8", b.s(0))
    b.arg("o", "ptr", "i8", b.s(1))
    es = nbytes_of(t)
    it = {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[es]
    b.emit("ld", it, a=b.x(0), b=b.s(0), c=b.desc([src.size], [es]))
    xo = b.x((src.nbytes + 63) // 64 * 64)
    b.emit("red", t, a=xo, b=b.x(0), c=outer, d=length, e=inner, flags={"op": op})
    b.emit("st", it, a=b.s(1), b=b.desc([outer * inner], [es]), c=xo)
    b.build().launch(0, 1, 1, 1, (sb, out))
    r = out.view(NP[t], outer * inner).copy()
    sb.free()
    out.free()
    return r


SHAPES = [(1, 100, 1), (3, 17, 5), (2, 1, 7), (1, 1000, 1), (4, 9, 300), (2, 5, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("t", ["i8", "i32", "i64"])
@pytest.mark.parametrize("op", list(INT_RED) + ["maxu", "minu"])
def test_red_int(op, t, shape):
    outer, length, inner = shape
    src = RNG.integers(-100, 100, outer * length * inner).astype(NP[t])
    got = run_red(op, t, src, outer, length, inner)
    x = src.reshape(outer, length, inner)
    if op in ("maxu", "minu"):
        u = bits_of(x)
        exp = (u.max(1) if op == "maxu" else u.min(1)).view(NP[t])
    else:
        exp = INT_RED[op](x, 1).astype(NP[t])
    assert (got == exp.reshape(-1)).all()


def test_red_i1_and_empty():
    src = np.array([1, 0, 1, 1, 1, 1], dtype=np.uint8)
    assert list(run_red("and", "i1", src, 2, 3, 1)) == [0, 1]
    assert list(run_red("or", "i1", src, 2, 3, 1)) == [1, 1]
    assert list(run_red("xor", "i1", src, 2, 3, 1)) == [0, 1]
    assert list(run_red("add", "i32", np.zeros(1, np.int32), 3, 0, 1)) == [0, 0, 0]
    assert list(run_red("mul", "i32", np.zeros(1, np.int32), 2, 0, 1)) == [1, 1]
    assert list(run_red("maxnum", "f32", np.zeros(1, np.float32), 1, 0, 1)) == [-np.inf]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", ["add", "mul", "maxnum", "minnum", "maximum", "minimum"])
def test_red_float(op, t, shape):
    outer, length, inner = shape
    v = RNG.standard_normal(outer * length * inner) * (1 if op != "mul" else 0.3) + (1.0 if op == "mul" else 0)
    src = store_of(v.astype(np.float64 if t == "f64" else np.float32), t)
    if op in ("maxnum", "minnum", "maximum", "minimum") and src.size > 3:
        src[1] = store_of(np.array([np.nan]), t)[0]
    got = run_red(op, t, src, outer, length, inner)
    x = f32_of(src, t).reshape(outer, length, inner)
    ct = np.float64 if t == "f64" else np.float32
    if op == "add":  # sequential, in the compute type
        exp = np.cumsum(x, axis=1, dtype=ct)[:, -1, :]
    elif op == "mul":
        exp = np.cumprod(x, axis=1, dtype=ct)[:, -1, :]
    else:
        f = {"maxnum": np.fmax, "minnum": np.fmin, "maximum": np.maximum, "minimum": np.minimum}[op]
        exp = f.reduce(x, axis=1)
    assert_float_same(got, store_of(exp.reshape(-1), t), t, zero_sign=False, ctx=f"red {op}.{t}")


# ---------------------------------------------------------------------------------------------
# dot
# ---------------------------------------------------------------------------------------------
def run_dot(t, t2, A, B, acc=None, acc_mode="none", batch=0):
    """acc_mode: none (acc NONE), inplace (acc == dst, preloaded), separate (acc elsewhere)."""
    nb = max(batch, 1)
    M, K = A.shape[-2:]
    N = B.shape[-1]
    es, es2 = nbytes_of(t), nbytes_of(t2)
    b = Builder("dot", lx_bytes=2 << 20)
    bufs = [DevBuf.of(A), DevBuf.of(B)]
    out = DevBuf(nb * M * N * es)
    for i, nm in enumerate(["a", "b"]):
        b.arg(nm, "ptr", "i8", b.s(i))
    b.arg("o", "ptr", "i8", b.s(2))
    xa, xb = b.x(0), b.x(A.nbytes // 64 * 64 + 64)
    xc = xb + B.nbytes // 64 * 64 + 64
    xacc = xc + nb * M * N * es + 64
    b.emit("ld", "i8", a=xa, b=b.s(0), c=b.desc([A.nbytes], [1]))
    b.emit("ld", "i8", a=xb, b=b.s(1), c=b.desc([B.nbytes], [1]))
    accop = isa.NONE
    if acc_mode != "none":
        bufs.append(DevBuf.of(acc))
        b.arg("acc", "ptr", "i8", b.s(3))
        accop = xc if acc_mode == "inplace" else xacc
        b.emit("ld", "i8", a=accop, b=b.s(3), c=b.desc([acc.nbytes], [1]))
    b.emit("dot", t, t2, a=xc, b=xa, c=xb, d=accop, e=M << 16 | N, n=K, flags={"batch": batch})
    b.emit("st", "i8", a=b.s(2), b=b.desc([nb * M * N * es], [1]), c=xc)
    b.build().launch(0, 1, 1, 1, tuple(bufs[:2]) + (out,) + tuple(bufs[2:]))
    r = out.view(NP[t], nb * M * N).reshape((batch, M, N) if batch else (M, N)).copy()
    for x in bufs + [out]:
        x.free()
    return r


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (6, 16, 8), (7, 17, 5), (64, 64, 64), (33, 130, 300), (130, 520, 9),
                                   (3, 5, 0)])
def test_dot_f32(M, N, K):
    A = RNG.standard_normal((M, K)).astype(np.float32)
    B = RNG.standard_normal((K, N)).astype(np.float32)
    got = run_dot("f32", "f32", A, B)
    np.testing.assert_allclose(got, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4 * max(K, 1) ** 0.5)


@pytest.mark.parametrize("acc_mode", ["inplace", "separate"])
@pytest.mark.parametrize("t2", ["f16", "bf16", "f32", "f8e4m3fn", "f8e5m2"])
def test_dot_inputs_acc(t2, acc_mode):
    M, N, K = 19, 33, 40
    Af = RNG.standard_normal((M, K))
    Bf = RNG.standard_normal((K, N))
    if t2 in FP8:
        A = np.array([[ref_encode(float(v), t2) for v in r] for r in Af], dtype=np.uint8)
        B = np.array([[ref_encode(float(v), t2) for v in r] for r in Bf], dtype=np.uint8)
        Av = np.array([[ref_decode(int(v), t2) for v in r] for r in A])
        Bv = np.array([[ref_decode(int(v), t2) for v in r] for r in B])
    else:
        A, B = store_of(Af.astype(np.float32), t2), store_of(Bf.astype(np.float32), t2)
        Av, Bv = f32_of(A, t2).astype(np.float64), f32_of(B, t2).astype(np.float64)
    acc = RNG.standard_normal((M, N)).astype(np.float32)
    got = run_dot("f32", t2, A, B, acc, acc_mode)
    np.testing.assert_allclose(got, Av @ Bv + acc, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_dot_half_output(t):
    M, N, K = 9, 20, 31
    A, B = (store_of(RNG.standard_normal(s).astype(np.float32), t) for s in [(M, K), (K, N)])
    acc = store_of(RNG.standard_normal((M, N)).astype(np.float32), t)
    got = run_dot(t, t, A, B, acc, "inplace")
    exp = f32_of(A, t).astype(np.float64) @ f32_of(B, t) + f32_of(acc, t)
    np.testing.assert_allclose(f32_of(got, t), exp, rtol=1e-2, atol=2e-2)


def test_dot_f64_and_i8_exact():
    A = RNG.standard_normal((23, 50))
    B = RNG.standard_normal((50, 18))
    np.testing.assert_allclose(run_dot("f64", "f64", A, B), A @ B, rtol=1e-12, atol=1e-12)
    Ai = RNG.integers(-128, 128, (37, 300)).astype(np.int8)
    Bi = RNG.integers(-128, 128, (300, 45)).astype(np.int8)
    acc = RNG.integers(-1000, 1000, (37, 45)).astype(np.int32)
    got = run_dot("i32", "i8", Ai, Bi, acc, "separate")
    assert (got == Ai.astype(np.int64) @ Bi.astype(np.int64) + acc).all()


def test_dot_batch():
    A = RNG.standard_normal((3, 8, 12)).astype(np.float32)
    B = RNG.standard_normal((3, 12, 10)).astype(np.float32)
    got = run_dot("f32", "f32", A, B, batch=3)
    np.testing.assert_allclose(got, np.matmul(A.astype(np.float64), B), rtol=1e-5, atol=1e-5)


def test_dot_rejects_bad_types():
    b = Builder()
    b.emit("dot", "f16", "i8", a=b.x(0), b=b.x(256), c=b.x(512), e=2 << 16 | 2, n=2)
    with pytest.raises(ValueError, match="dot of i8 inputs into f16"):
        b.build()
    b = Builder(lx_bytes=1024)
    b.emit("dot", "f32", "f32", a=b.x(0), b=b.x(256), c=b.x(512), e=64 << 16 | 64, n=64)
    with pytest.raises(ValueError, match="outside the arena"):
        b.build()
