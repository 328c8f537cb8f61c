"""The interpreter (`spyre_triton._runtime.Kernel`) against numpy, torch and scipy.

Programs are written directly with `tests/asm_helpers.Builder` (one instruction at a time) and run
on device memory from `_runtime.alloc`. Table-driven: every opcode, every dtype it takes, the
broadcast variants, edge values, and the failure modes (bounds, assertions, bad binaries, Ctrl-C).
"""
from __future__ import annotations

import math
from fractions import Fraction
import os
import re
import signal
import struct
import sys
import threading
import time

import numpy as np
import pytest
import torch

from asm_helpers import NP, Builder, DevBuf, const_bits, nbytes_of, run_elementwise, run_red

from spyre_triton import _runtime as rt
from spyre_triton import isa

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
    with np.errstate(invalid="ignore"):
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


SHAPES = [(1, 100, 1), (3, 17, 5), (2, 1, 7), (1, 1000, 1), (4, 9, 300), (2, 5, 1),
          (1, 128, 1), (2, 127, 1), (3, 4099, 1)]  # red: 2 * RED_LANES is where the lanes start


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


def red_fixed_order(x, f):
    """The order `red` combines floats in (docs/isa.md): a contiguous row (inner == 1) of 2 * RED_LANES or
    more in RED_LANES interleaved partial results, combined as a tree (j with j + RED_LANES / 2, ...,
    j + 1), then the tail; otherwise index order."""
    lanes = isa.RED_LANES
    outer, length, inner = x.shape
    out = np.empty((outer, inner), dtype=x.dtype)
    for o in range(outer):
        for i in range(inner):
            row = x[o, :, i]
            if inner == 1 and length >= 2 * lanes:
                lane = row[:lanes].copy()
                n_full = lanes + (length - lanes) // lanes * lanes
                for l0 in range(lanes, n_full, lanes):
                    lane = f(lane, row[l0:l0 + lanes])
                w = lanes // 2
                while w >= 1:
                    lane[:w] = f(lane[:w], lane[w:2 * w])
                    w //= 2
                r = lane[0]
                for v in row[n_full:]:
                    r = f(r, v)
            else:
                r = row[0]
                for v in row[1:]:
                    r = f(r, v)
            out[o, i] = r
    return out


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
    if op in ("add", "mul"):  # the ISA's fixed order, in the compute type
        exp = red_fixed_order(x.astype(ct), np.add if op == "add" else np.multiply)
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


# ---------------------------------------------------------------------------------------------
# data movement: const / iota / copy / tcopy
# ---------------------------------------------------------------------------------------------
def run_lx(build, out_t, n, args=(), grid=(1, 1, 1), num_threads=1, lx=1 << 16):
    """build(b, xo) emits instructions that leave n elements of out_t at LX offset xo (args occupy
    slots s1...); the result is stored and returned."""
    b = Builder("lx", lx_bytes=lx)
    out = DevBuf(n * nbytes_of(out_t) + 8)
    b.arg("o", "ptr", "i8", b.s(0))
    for i, _ in enumerate(args):
        b.arg(f"a{i}", "ptr", "i8", b.s(i + 1))
    xo = b.x(lx // 2)
    build(b, xo)
    es = nbytes_of(out_t)
    b.emit("st", {1: "i8", 2: "i16", 4: "i32", 8: "i64"}[es], a=b.s(0), b=b.desc([n], [es]), c=xo)
    b.build().launch(0, *grid, (out,) + tuple(args), num_threads=num_threads)
    r = out.view(NP[out_t], n).copy()
    out.free()
    return r


def test_const_iota_copy():
    def build(b, xo):
        b.emit("const", "f32", a=xo, b=b.const(const_bits("f32", 2.5)), n=4)
        b.emit("iota", "i32", a=xo + 16, b=(-3) & 0xFFFFFFFF, n=4)
        b.emit("copy", "i32", a=xo + 32, b=xo + 16, n=4)
        b.emit("copy", "i32", a=xo + 48, b=xo + 20, n=4, flags={"bc1": 1})
    r = run_lx(build, "i32", 16)
    assert list(r[:4].view(np.float32)) == [2.5] * 4
    assert list(r[4:8]) == [-3, -2, -1, 0] and list(r[8:12]) == [-3, -2, -1, 0] and list(r[12:]) == [-2] * 4


@pytest.mark.parametrize("t", ["i8", "i16", "i64", "i1"])
def test_iota_dtypes(t):
    r = run_lx(lambda b, xo: b.emit("iota", t, a=xo, b=126, n=5), t, 5)
    exp = [wrap(126 + i, BITS[t], t != "i1") for i in range(5)]
    assert list(r) == exp


@pytest.mark.parametrize("t", ["i8", "f16", "f32", "f64"])
def test_tcopy(t):
    es = nbytes_of(t)
    src = np.arange(15).astype(NP[t]) if t != "f16" else np.arange(15).astype(np.float16)

    def build(b, xo):
        b.emit("ld", t, a=b.x(0), b=b.s(1), c=b.desc([15], [es]))
        b.emit("tcopy", t, a=xo, b=b.x(0), c=b.desc([5, 3], [1, 5]))  # transpose of [3, 5]
        b.emit("tcopy", t, a=xo + 15 * es, b=b.x(0), c=b.desc([2, 3], [0, 1]))  # broadcast row 0
        b.emit("tcopy", t, a=xo + 21 * es, b=b.x(14 * es), c=b.desc([4], [-2]))  # reversed, step 2
        b.emit("tcopy", t, a=xo + 25 * es, b=b.x(0), c=b.desc([], []))  # rank 0: one element
    buf = DevBuf.of(src)
    r = run_lx(build, t, 26, args=(buf,))
    buf.free()
    exp = np.concatenate([src.reshape(3, 5).T.reshape(-1), np.tile(src[:3], 2), src[14:6:-2], src[:1]])
    assert (r == exp).all()


def test_tcopy_validation():
    b = Builder(n_sregs=1, lx_bytes=256)
    b.emit("tcopy", "f32", a=b.x(0), b=b.x(4), c=b.desc([4], [-2]))
    with pytest.raises(ValueError, match="tcopy source"):
        b.build()
    b = Builder()
    b.emit("tcopy", "f32", a=b.x(0), b=b.x(64), c=b.desc([4], [("s", 0)]))
    with pytest.raises(ValueError, match="tcopy strides must be constants"):
        b.build()


# ---------------------------------------------------------------------------------------------
# ld / st
# ---------------------------------------------------------------------------------------------
def test_ld_masked_other():
    src = np.arange(100, dtype=np.float32)
    buf = DevBuf.of(src)
    mask = DevBuf.of((np.arange(40) % 3 != 0).astype(np.uint8))
    other = DevBuf.of(np.full(40, -1, np.float32))

    def build(b, xo):
        b.emit("ld", "i8", a=b.x(0), b=b.s(2), c=b.desc([40], [1]))  # mask
        b.emit("ld", "f32", a=b.x(64), b=b.s(3), c=b.desc([40], [4]))  # other tile
        b.emit("const", "f32", a=b.x(256), b=b.const(const_bits("f32", 7.0)), n=1)
        b.emit("ld", "f32", a=xo, b=b.s(1), c=b.desc([40], [4]), d=b.x(0), e=b.x(64))
        b.emit("ld", "f32", a=xo + 160, b=b.s(1), c=b.desc([40], [4]), d=b.x(0), e=b.x(256), flags={"bc_other": 1})
        b.emit("ld", "f32", a=xo + 320, b=b.s(1), c=b.desc([40], [4]), d=b.x(0))  # other NONE: 0
    r = run_lx(build, "f32", 120, args=(buf, mask, other))
    m = np.arange(40) % 3 != 0
    np.testing.assert_array_equal(r[:40], np.where(m, src[:40], -1))
    np.testing.assert_array_equal(r[40:80], np.where(m, src[:40], 7))
    np.testing.assert_array_equal(r[80:], np.where(m, src[:40], 0))
    for x in (buf, mask, other):
        x.free()


def test_ld_strided_and_dynamic_strides():
    mat = np.arange(12 * 10, dtype=np.int32).reshape(12, 10)
    buf = DevBuf.of(mat)

    def build(b, xo):
        # rows 2..5, cols 3..7 of a row-major [12, 10] matrix
        b.emit("add", "i64", a=b.s(10), b=b.s(1), c=b.x(0), n=1, flags={"bc2": 1})
        b.emit("const", "i64", a=b.x(0), b=b.const((2 * 10 + 3) * 4), n=1)
        b.emit("add", "i64", a=b.s(10), b=b.s(1), c=b.x(0), n=1)
        b.emit("ld", "i32", a=xo, b=b.s(10), c=b.desc([4, 5], [40, 4]))
        # transposed [5, 4] view of the same block
        b.emit("ld", "i32", a=xo + 80, b=b.s(10), c=b.desc([5, 4], [4, 40]))
        # dynamic strides: row stride from s11, col stride from s12; negative col stride reads reversed
        b.emit("const", "i64", a=b.s(11), b=b.const(80), n=1)
        b.emit("const", "i64", a=b.s(12), b=b.const(-4), n=1)
        b.emit("ld", "i32", a=xo + 160, b=b.s(10), c=b.desc([2, 3], [("s", b.s(11)), ("s", b.s(12))]))
        # rank 0: one element
        b.emit("ld", "i32", a=xo + 184, b=b.s(10), c=b.desc([], []))
    r = run_lx(build, "i32", 47, args=(buf,))
    blk = mat[2:6, 3:8]
    assert (r[:20] == blk.reshape(-1)).all()
    assert (r[20:40] == blk.T.reshape(-1)).all()
    assert (r[40:46] == np.array([[mat[2 + 2 * i, 3 - j] for j in range(3)] for i in range(2)]).reshape(-1)).all()
    assert r[46] == mat[2, 3]
    buf.free()


def test_ld_bc_mask_and_empty_and_masked_never_touched():
    src = DevBuf.of(np.arange(8, dtype=np.int16))

    def build(b, xo):
        b.emit("const", "i8", a=b.x(0), b=b.const(1), n=1)
        b.emit("const", "i8", a=b.x(1), b=b.const(0), n=1)
        b.emit("const", "i16", a=b.x(2), b=b.const(-5), n=1)
        b.emit("ld", "i16", a=xo, b=b.s(1), c=b.desc([8], [2]), d=b.x(0), flags={"bc_mask": 1})
        b.emit("ld", "i16", a=xo + 16, b=b.s(1), c=b.desc([8], [2]), d=b.x(1), e=b.x(2),
               flags={"bc_mask": 1, "bc_other": 1})
        # a zero-extent load touches nothing, whatever the base
        b.emit("ld", "i16", a=xo + 32, b=b.s(5), c=b.desc([0, 4], [2, 2]))
        # masked-off elements far outside the allocation are never checked nor read
        b.emit("iota", "i8", a=b.x(16), b=0, n=64)
        b.emit("const", "i8", a=b.x(96), b=b.const(4), n=1)
        b.emit("cmpi", "i8", a=b.x(128), b=b.x(16), c=b.x(96), n=64, flags={"pred": "slt", "bc2": 1})
        b.emit("ld", "i16", a=xo + 32, b=b.s(1), c=b.desc([64], [2]), d=b.x(128), e=b.x(2), flags={"bc_other": 1})
    r = run_lx(build, "i16", 16 + 64, args=(src,))
    assert list(r[:8]) == list(range(8)) and list(r[8:16]) == [-5] * 8
    assert list(r[16:20]) == [0, 1, 2, 3] and list(r[20:]) == [-5] * 60
    src.free()


def test_st_masked_strided_bcast():
    dst = DevBuf(4 * 64)
    dst.view(np.float32)[:] = -1

    def build(b, xo):
        b.emit("iota", "i32", a=b.x(0), b=0, n=16)
        b.emit("cvt", "f32", "i32", a=b.x(64), b=b.x(0), n=16, flags={"mode": "sitofp"})
        b.emit("const", "i32", a=b.x(128), b=b.const(10), n=1)
        b.emit("cmpi", "i32", a=b.x(192), b=b.x(0), c=b.x(128), n=16, flags={"pred": "slt", "bc2": 1})
        # every other element, masked to the first 10
        b.emit("st", "f32", a=b.s(1), b=b.desc([16], [8]), c=b.x(64), d=b.x(192))
        # a broadcast value into the last 8 elements, as a [2, 4] block
        b.emit("add", "i64", a=b.s(9), b=b.s(1), c=b.x(256), n=1, flags={"bc2": 1})
        b.emit("const", "i64", a=b.x(256), b=b.const(56 * 4), n=1)
        b.emit("add", "i64", a=b.s(9), b=b.s(1), c=b.x(256), n=1)
        b.emit("const", "f32", a=b.x(264), b=b.const(const_bits("f32", 9.5)), n=1)
        b.emit("st", "f32", a=b.s(9), b=b.desc([2, 4], [16, 4]), c=b.x(264), flags={"bc_src": 1})
        b.emit("const", "i32", a=xo, b=b.const(0), n=1)
    run_lx(build, "i32", 1, args=(dst,))
    exp = np.full(64, -1, np.float32)
    exp[0:20:2] = np.arange(10)
    exp[56:64] = 9.5
    np.testing.assert_array_equal(dst.view(np.float32), exp)
    dst.free()


# ---------------------------------------------------------------------------------------------
# gather / scatter
# ---------------------------------------------------------------------------------------------
def test_gather_scatter():
    data = DevBuf.of(np.arange(50, dtype=np.float64) * 1.5)
    idx = RNG.permutation(50)[:20]
    addrs = DevBuf.of((data.addr + idx * 8).astype(np.uint64))
    mask = DevBuf.of((np.arange(20) % 4 != 1).astype(np.uint8))
    out = DevBuf(8 * 50)
    out.view(np.float64)[:] = 0

    def build(b, xo):
        b.emit("ld", "i64", a=b.x(0), b=b.s(2), c=b.desc([20], [8]))
        b.emit("ld", "i8", a=b.x(256), b=b.s(3), c=b.desc([20], [1]))
        b.emit("const", "f64", a=b.x(320), b=b.const(const_bits("f64", -2.0)), n=1)
        b.emit("gather", "f64", a=xo, b=b.x(0), c=b.x(256), d=b.x(320), n=20, flags={"bc_other": 1})
        b.emit("gather", "f64", a=xo + 160, b=b.x(0), n=3, flags={"bc_addr": 1})
        # scatter: out[idx[i]] = 100 + i where mask
        b.emit("iota", "i32", a=b.x(400), b=100, n=20)
        b.emit("cvt", "f64", "i32", a=b.x(512), b=b.x(400), n=20, flags={"mode": "sitofp"})
        b.emit("sub", "i64", a=b.x(700), b=b.x(0), c=b.s(1), n=20, flags={"bc2": 1})  # idx*8 offsets
        b.emit("add", "i64", a=b.x(700), b=b.x(700), c=b.s(4), n=20, flags={"bc2": 1})  # + out base
        b.emit("scatter", "f64", a=b.x(700), b=b.x(512), c=b.x(256), n=20)
    r = run_lx(build, "f64", 23, args=(data, addrs, mask, out))
    m = np.arange(20) % 4 != 1
    np.testing.assert_array_equal(r[:20], np.where(m, idx * 1.5, -2.0))
    np.testing.assert_array_equal(r[20:], [idx[0] * 1.5] * 3)
    exp = np.zeros(50)
    exp[idx[m]] = 100 + np.arange(20)[m]
    np.testing.assert_array_equal(out.view(np.float64), exp)
    for x in (data, addrs, mask, out):
        x.free()


# ---------------------------------------------------------------------------------------------
# atomics
# ---------------------------------------------------------------------------------------------
ATOM_REF = {
    "add": lambda o, v, t: wrap(o + v, BITS[t], True), "max": lambda o, v, t: max(o, v),
    "min": lambda o, v, t: min(o, v), "and": lambda o, v, t: o & v, "or": lambda o, v, t: o | v,
    "xor": lambda o, v, t: o ^ v, "xchg": lambda o, v, t: v,
    "umax": lambda o, v, t: wrap(max(wrap(o, BITS[t], False), wrap(v, BITS[t], False)), BITS[t], True),
    "umin": lambda o, v, t: wrap(min(wrap(o, BITS[t], False), wrap(v, BITS[t], False)), BITS[t], True),
}


def run_atom(op, t, init, vals, idx, mask=None):
    """One program: atom op on mem[idx[i]] with vals[i]; returns (old values, memory)."""
    es = nbytes_of(t)
    n = len(vals)
    mem = DevBuf.of(init)
    addrs = DevBuf.of((mem.addr + np.asarray(idx) * es).astype(np.uint64))
    vb = DevBuf.of(vals)
    mb = DevBuf.of(np.ones(n, np.uint8) if mask is None else mask)

    def build(b, xo):
        b.emit("ld", "i64", a=b.x(0), b=b.s(2), c=b.desc([n], [8]))
        b.emit("ld", t, a=b.x(1024), b=b.s(3), c=b.desc([n], [es]))
        b.emit("ld", "i8", a=b.x(2048), b=b.s(4), c=b.desc([n], [1]))
        b.emit("atom", t, a=xo, b=b.x(0), c=b.x(1024), d=b.x(2048), n=n, flags={"op": op})
    old = run_lx(build, t, n, args=(mem, addrs, vb, mb))
    res = mem.view(NP[t], len(init)).copy()
    for x in (mem, addrs, vb, mb):
        x.free()
    return old, res


@pytest.mark.parametrize("t", ["i8", "i16", "i32", "i64"])
@pytest.mark.parametrize("op", list(ATOM_REF))
def test_atom_int(op, t):
    init = np.array(int_edges(t)[:6], dtype=np.int64).astype(NP[t])
    vals = np.array([3, -1, 5, 0, 7, -9, 2, 1], dtype=np.int64).astype(NP[t])
    idx = [0, 1, 2, 3, 4, 5, 0, 0]  # index order: the last two hit element 0 again
    mask = np.array([1, 1, 1, 1, 1, 0, 1, 1], np.uint8)
    old, res = run_atom(op, t, init, vals, idx, mask)
    mem = [int(x) for x in init]
    exp_old = []
    for i, (j, v) in enumerate(zip(idx, vals)):
        if not mask[i]:
            exp_old.append(0)
            continue
        exp_old.append(mem[j])
        mem[j] = wrap(ATOM_REF[op](mem[j], int(v), t), BITS[t], True)
    assert list(old) == exp_old and list(res) == mem


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", ["fadd", "max", "min", "xchg"])
def test_atom_float(op, t):
    init = store_of(np.array([1.5, -2.0, 0.0, 8.0]), t)
    vals = store_of(np.array([0.25, 3.0, -1.0, 8.0, 1.0]), t)
    idx = [0, 1, 2, 3, 0]
    old, res = run_atom(op, t, init, vals, idx)
    mem = list(f32_of(init, t).astype(np.float64))
    exp_old = []
    for j, v in zip(idx, f32_of(vals, t)):
        exp_old.append(mem[j])
        mem[j] = {"fadd": lambda o: o + v, "max": lambda o: max(o, v), "min": lambda o: min(o, v),
                  "xchg": lambda o: v}[op](mem[j])
    np.testing.assert_array_equal(f32_of(old, t), exp_old)
    np.testing.assert_array_equal(f32_of(res, t), mem)


def test_atom_i1_and_acas():
    old, res = run_atom("or", "i1", np.array([0, 1], np.uint8), np.array([1, 0, 0], np.uint8), [0, 1, 0])
    assert list(old) == [0, 1, 1] and list(res) == [1, 1]
    for t in ["i8", "i16", "i32", "i64", "f32", "f64"]:
        es = nbytes_of(t)
        mem = DevBuf.of(np.array([5, 6, 7], dtype=NP[t]))
        addrs = DevBuf.of((mem.addr + np.array([0, 1, 2, 0]) * es).astype(np.uint64))
        cmp_ = DevBuf.of(np.array([5, 0, 7, 9], dtype=NP[t]))
        val = DevBuf.of(np.array([9, 1, 2, 3], dtype=NP[t]))

        def build(b, xo):
            b.emit("ld", "i64", a=b.x(0), b=b.s(2), c=b.desc([4], [8]))
            b.emit("ld", t, a=b.x(64), b=b.s(3), c=b.desc([4], [es]))
            b.emit("ld", t, a=b.x(128), b=b.s(4), c=b.desc([4], [es]))
            b.emit("acas", t, a=xo, b=b.x(0), c=b.x(64), d=b.x(128), n=4)
        old = run_lx(build, t, 4, args=(mem, addrs, cmp_, val))
        assert list(old) == [5, 6, 7, 9], t
        assert list(mem.view(NP[t], 3)) == [3, 6, 2], t
        for x in (mem, addrs, cmp_, val):
            x.free()


def counter_kernel(iters: int, t="i32", op="add"):
    """Each program adds 1 to *counter (slot 0), `iters` times, with a loop."""
    b = Builder("count")
    b.arg("counter", "ptr", t, b.s(0))
    b.emit("const", t, a=b.x(0), b=b.const(const_bits(t, 1)), n=1)
    b.emit("const", "i32", a=b.s(2), b=b.const(iters), n=1)
    b.emit("const", "i32", a=b.s(3), b=b.const(1), n=1)
    top = b.here()
    b.emit("atom", t, b=b.s(0), c=b.x(0), n=1, flags={"op": op})
    b.emit("sub", "i32", a=b.s(2), b=b.s(2), c=b.s(3), n=1)
    b.emit("brnz", "i32", a=b.s(2), b=top)
    return b.build()


@pytest.mark.parametrize("threads", [1, 4])
def test_atomic_add_concurrency(threads):
    k = counter_kernel(2000)
    c = DevBuf(8)
    c.view(np.int64)[:] = 0
    k.launch(0, 37, 1, 1, (c,), num_threads=threads)
    assert c.view(np.int32)[0] == 37 * 2000
    kf = counter_kernel(500, "f32", "fadd")
    c.view(np.float32)[0] = 0
    kf.launch(0, 16, 1, 1, (c,), num_threads=threads)
    assert c.view(np.float32)[0] == 16 * 500
    c.free()


def test_cas_spin_lock():
    """A lock built from acas (acquire) and atom xchg (release) protects a plain ld/add/st."""
    b = Builder("spin")
    b.arg("lock", "ptr", "i32", b.s(0))
    b.arg("counter", "ptr", "i32", b.s(1))
    x = b.x
    b.emit("const", "i32", a=x(0), b=b.const(0), n=1)  # cmp
    b.emit("const", "i32", a=x(4), b=b.const(1), n=1)  # 1
    b.emit("const", "i32", a=b.s(4), b=b.const(200), n=1)  # iterations
    top = b.here()
    retry = b.here()
    b.emit("acas", "i32", a=x(8), b=b.s(0), c=x(0), d=x(4), n=1)
    b.emit("cmpi", "i32", a=b.s(6), b=x(8), c=x(0), n=1, flags={"pred": "eq"})
    b.emit("brz", "i1", a=b.s(6), b=retry)
    b.emit("ld", "i32", a=x(16), b=b.s(1), c=b.desc([], []))
    b.emit("add", "i32", a=x(16), b=x(16), c=x(4), n=1)
    b.emit("st", "i32", a=b.s(1), b=b.desc([], []), c=x(16))
    b.emit("atom", "i32", b=b.s(0), c=x(0), n=1, flags={"op": "xchg"})
    b.emit("sub", "i32", a=b.s(4), b=b.s(4), c=x(4), n=1)
    b.emit("brnz", "i32", a=b.s(4), b=top)
    k = b.build()
    lock, counter = DevBuf(4), DevBuf(4)
    lock.view(np.int32)[0] = 0
    counter.view(np.int32)[0] = 0
    k.launch(0, 24, 1, 1, (lock, counter), num_threads=4)
    assert counter.view(np.int32)[0] == 24 * 200 and lock.view(np.int32)[0] == 0
    lock.free()
    counter.free()


# ---------------------------------------------------------------------------------------------
# control flow, grid registers, multi-thread determinism, statistics
# ---------------------------------------------------------------------------------------------
def test_loop_and_branches():
    def build(b, xo):
        b.emit("const", "i32", a=b.s(2), b=b.const(0), n=1)
        b.emit("const", "i32", a=b.s(3), b=b.const(10), n=1)
        b.emit("const", "i32", a=b.s(4), b=b.const(1), n=1)
        top = b.here()
        b.emit("add", "i32", a=b.s(2), b=b.s(2), c=b.s(3), n=1)
        b.emit("sub", "i32", a=b.s(3), b=b.s(3), c=b.s(4), n=1)
        b.emit("brnz", "i32", a=b.s(3), b=top)
        b.emit("copy", "i32", a=xo, b=b.s(2), n=1)
        # brz on a float: skipped when 0.5 != 0
        b.emit("const", "f32", a=b.s(5), b=b.const(const_bits("f32", 0.5)), n=1)
        b.emit("const", "i32", a=xo + 4, b=b.const(1), n=1)
        b.emit("brz", "f32", a=b.s(5), b=b.here() + 2)
        b.emit("const", "i32", a=xo + 4, b=b.const(2), n=1)
        b.emit("jmp", a=b.here() + 2)
        b.emit("const", "i32", a=xo + 4, b=b.const(3), n=1)  # jumped over
    assert list(run_lx(build, "i32", 2)) == [55, 2]


def test_halt():
    b = Builder("halt")
    b.arg("o", "ptr", "i32", b.s(0))
    b.emit("const", "i32", a=b.x(0), b=b.const(1), n=1)
    b.emit("const", "i32", a=b.x(4), b=b.const(2), n=1)
    b.emit("st", "i32", a=b.s(0), b=b.desc([], []), c=b.x(0))
    b.emit("halt")
    b.emit("st", "i32", a=b.s(0), b=b.desc([], []), c=b.x(4))
    out = DevBuf(4)
    b.build().launch(0, 2, 1, 1, (out,))
    assert out.view(np.int32)[0] == 1
    out.free()


def test_pid_nprog_grid():
    b = Builder("grid")
    b.arg("o", "ptr", "i32", b.s(0))
    for ax in range(3):
        b.emit("pid", a=b.s(1 + ax), b=ax)
        b.emit("nprog", a=b.s(4 + ax), b=ax)
    # linear = x + gx * (y + gy * z); out[linear] = x + 10 y + 100 z
    b.emit("mul", "i32", a=b.s(7), b=b.s(6 - 1), c=b.s(3), n=1)
    b.emit("add", "i32", a=b.s(7), b=b.s(7), c=b.s(2), n=1)
    b.emit("mul", "i32", a=b.s(7), b=b.s(7), c=b.s(4), n=1)
    b.emit("add", "i32", a=b.s(7), b=b.s(7), c=b.s(1), n=1)
    b.emit("const", "i32", a=b.s(8), b=b.const(10), n=1)
    b.emit("const", "i32", a=b.s(9), b=b.const(100), n=1)
    b.emit("mul", "i32", a=b.s(10), b=b.s(2), c=b.s(8), n=1)
    b.emit("mul", "i32", a=b.s(11), b=b.s(3), c=b.s(9), n=1)
    b.emit("add", "i32", a=b.s(10), b=b.s(10), c=b.s(11), n=1)
    b.emit("add", "i32", a=b.s(10), b=b.s(10), c=b.s(1), n=1)
    b.emit("cvt", "i64", "i32", a=b.s(12), b=b.s(7), n=1, flags={"mode": "sext"})
    b.emit("const", "i64", a=b.s(13), b=b.const(4), n=1)
    b.emit("mul", "i64", a=b.s(12), b=b.s(12), c=b.s(13), n=1)
    b.emit("add", "i64", a=b.s(12), b=b.s(12), c=b.s(0), n=1)
    b.emit("st", "i32", a=b.s(12), b=b.desc([], []), c=b.s(10))
    k = b.build()
    out = DevBuf(4 * 60)
    k.launch(0, 5, 4, 3, (out,), num_threads=3)
    z, y, x = np.meshgrid(range(3), range(4), range(5), indexing="ij")
    assert (out.view(np.int32, 60) == (x + 10 * y + 100 * z).reshape(-1)).all()
    out.free()


def pid_work_kernel():
    """out[pid*256 : (pid+1)*256] = exp(iota / 100 + pid) computed in f32."""
    b = Builder("work")
    b.arg("o", "ptr", "f32", b.s(0))
    b.emit("pid", a=b.s(1), b=0)
    b.emit("iota", "i32", a=b.x(0), b=0, n=256)
    b.emit("add", "i32", a=b.x(0), b=b.x(0), c=b.s(1), n=256, flags={"bc2": 1})
    b.emit("cvt", "f32", "i32", a=b.x(1024), b=b.x(0), n=256, flags={"mode": "sitofp"})
    b.emit("const", "f32", a=b.x(2048), b=b.const(const_bits("f32", 0.01)), n=1)
    b.emit("mul", "f32", a=b.x(1024), b=b.x(1024), c=b.x(2048), n=256, flags={"bc2": 1})
    b.emit("math1", "f32", a=b.x(1024), b=b.x(1024), n=256, flags={"fn": "sin"})
    b.emit("cvt", "i64", "i32", a=b.s(2), b=b.s(1), n=1, flags={"mode": "sext"})
    b.emit("const", "i64", a=b.s(3), b=b.const(1024), n=1)
    b.emit("mul", "i64", a=b.s(2), b=b.s(2), c=b.s(3), n=1)
    b.emit("add", "i64", a=b.s(2), b=b.s(2), c=b.s(0), n=1)
    b.emit("st", "f32", a=b.s(2), b=b.desc([256], [4]), c=b.x(1024))
    return b.build()


def test_multithread_equals_single_thread():
    k = pid_work_kernel()
    outs = []
    for nt in (1, 2, 5):
        o = DevBuf(1024 * 40)
        o.view(np.uint8)[:] = 0
        k.launch(0, 40, 1, 1, (o,), num_threads=nt)
        outs.append(o.view(np.float32).copy())
        o.free()
    assert (outs[0] == outs[1]).all() and (outs[0] == outs[2]).all()
    np.testing.assert_allclose(outs[0][:256], np.sin((np.arange(256)) * np.float32(0.01)), rtol=1e-6)


def test_num_threads_env(monkeypatch):
    monkeypatch.setenv("SPYRE_NUM_THREADS", "3")
    assert rt.default_num_threads() == 3
    monkeypatch.delenv("SPYRE_NUM_THREADS")
    assert 1 <= rt.default_num_threads() <= 32
    k = pid_work_kernel()
    o = DevBuf(1024 * 8)
    monkeypatch.setenv("SPYRE_NUM_THREADS", "2")
    k.launch(0, 8, 1, 1, (o,))
    o.free()


def test_stats_counting():
    k = counter_kernel(10)
    c = DevBuf(4)
    rt.set_counting(True)
    try:
        k.reset_stats()
        k.launch(0, 3, 1, 1, (c,), num_threads=2)
        s = k.stats()
    finally:
        rt.set_counting(False)
    assert s["launches"] == 1 and s["programs"] == 3
    assert s["instructions"] == {"const": 9, "atom": 30, "sub": 30, "brnz": 30}
    assert s["total_instructions"] == 99
    k.launch(0, 3, 1, 1, (c,))
    s2 = k.stats()
    assert s2["instructions"] == s["instructions"] and s2["launches"] == 2 and s2["programs"] == 6
    assert not rt.get_counting()
    c.free()
    rt.synchronize()


def test_kernel_attributes():
    b = Builder("attrs", n_sregs=7, lx_bytes=4096)
    b.arg("x", "ptr", "f32", b.s(0))
    b.arg("n", "int", "i32", b.s(1))
    b.arg("BLOCK", "constexpr")
    b.emit("halt")
    k = b.build()
    assert (k.name, k.n_sregs, k.lx_bytes, k.num_args, k.n_insns) == ("attrs", 7, 4096, 3, 1)
    assert rt.LX_BYTES_MAX == 2 << 20


def test_scalar_args_packing():
    """int/float arguments land in their slots per dtype; constexprs are ignored."""
    b = Builder("args")
    specs = [("p", "ptr", "i8"), ("a", "int", "i8"), ("b", "int", "i16"), ("c", "int", "i32"), ("d", "int", "i64"),
             ("e", "int", "i1"), ("f", "float", "f32"), ("g", "float", "f64"), ("h", "float", "f16"),
             ("i", "float", "bf16"), ("K", "constexpr", "-"), ("z", "ptr", "f32")]
    for i, (nm, kind, dt) in enumerate(specs):
        b.arg(nm, kind, dt, -1 if kind == "constexpr" else b.s(i))
    for i in range(1, 10):
        b.emit("st", "i64", a=b.s(0), b=b.desc([], []), c=b.s(i))
        b.emit("add", "i64", a=b.s(0), b=b.s(0), c=b.x(0), n=1, flags={"bc2": 1})
        if i == 1:
            b.p.insns.insert(0, isa.Insn("const", "i64", args={"a": b.x(0), "b": b.const(8), "n": 1}))
    b.emit("st", "i64", a=b.s(0), b=b.desc([], []), c=b.s(11))
    k = b.build()
    out = DevBuf(8 * 10)
    k.launch(0, 1, 1, 1, (out, -3, 40000, -7, 1 << 40, True, 1.5, -2.25, 0.1, 3.0, 128, None))
    v = out.view(np.uint64, 10)
    assert int(v[0]) == (-3) & (2 ** 64 - 1) and int(v[1]) == wrap(40000, 16, True) & (2 ** 64 - 1)
    assert int(v[2]) == (-7) & (2 ** 64 - 1) and int(v[3]) == 1 << 40 and int(v[4]) == 1
    assert struct.unpack("<f", struct.pack("<I", int(v[5]) & 0xFFFFFFFF))[0] == 1.5
    assert struct.unpack("<d", struct.pack("<Q", int(v[6])))[0] == -2.25
    assert int(v[7]) == int(np.array([0.1], np.float16).view(np.uint16)[0])
    assert int(v[8]) == 0x4040 and int(v[9]) == 0
    out.free()


# ---------------------------------------------------------------------------------------------
# print
# ---------------------------------------------------------------------------------------------
def test_print_format(capfd):
    b = Builder("pr")
    b.emit("pid", a=b.s(0), b=0)
    b.emit("iota", "i32", a=b.x(0), b=(-2) & 0xFFFFFFFF, n=12)
    b.emit("print", "i32", a=b.string(" x: "), b=b.x(0), n=12, flags={"signed": 1})
    b.emit("cvt", "f32", "i32", a=b.x(64), b=b.x(0), n=2, flags={"mode": "sitofp"})
    b.emit("print", "f32", a=b.string(" f: "), b=b.x(64), n=2)
    b.emit("print", "i16", a=b.string(" h: "), b=b.x(0), n=1, flags={"hex": 1})
    b.emit("print", "i32", a=b.string(" u: "), b=b.x(0), n=1)
    b.emit("print", "i32", a=b.string(" pid: "), b=b.s(0), n=1, flags={"scalar": 1})
    b.emit("print", "i32", a=b.string(" hello"), b=b.x(0), n=0)
    k = b.build()
    k.launch(0, 2, 1, 1, (), num_threads=1)
    out = capfd.readouterr().out.splitlines()
    exp = []
    for p in range(2):
        exp += [f"pid ({p}, 0, 0) idx ({i:2d}) x: {i - 2}" for i in range(12)]
        exp += [f"pid ({p}, 0, 0) idx (0) f: -2.000000", f"pid ({p}, 0, 0) idx (1) f: -1.000000"]
        exp += [f"pid ({p}, 0, 0) idx () h: 0xfffe", f"pid ({p}, 0, 0) idx () u: 4294967294",
                f"pid ({p}, 0, 0) idx () pid: {p}", f"pid ({p}, 0, 0) hello"]
    exp = [e.replace("idx () h", "idx (0) h").replace("idx () u", "idx (0) u") for e in exp]
    assert out == exp


def test_print_lines_of_a_program_stay_together(capfd):
    b = Builder("pr")
    b.emit("pid", a=b.s(0), b=0)
    b.emit("copy", "i32", a=b.x(0), b=b.s(0), n=50, flags={"bc1": 1})
    b.emit("print", "i32", a=b.string(" v: "), b=b.x(0), n=50)
    b.build().launch(0, 16, 1, 1, (), num_threads=4)
    lines = capfd.readouterr().out.splitlines()
    assert len(lines) == 16 * 50
    for blk in range(16):
        chunk = lines[blk * 50:(blk + 1) * 50]
        p = chunk[0].split("(")[1].split(",")[0]
        assert all(ln.startswith(f"pid ({p}, 0, 0)") and ln.endswith(f"v: {p}") for ln in chunk)


# ---------------------------------------------------------------------------------------------
# faults: bounds, alignment, assertions; the device keeps working
# ---------------------------------------------------------------------------------------------
def oob_kernel(kind: str, count: int = 20):
    b = Builder("oob_" + kind)
    b.arg("x_ptr", "ptr", "f32", b.s(0))
    loc = b.loc("/src/kern.py", 42, "    y = tl.load(x_ptr + offs)")
    if kind == "load":
        b.emit("ld", "f32", a=b.x(0), b=b.s(0), c=b.desc([count], [4]), loc=loc)
    elif kind == "store":
        b.emit("const", "f32", a=b.x(0), b=b.const(0), n=1)
        b.emit("st", "f32", a=b.s(0), b=b.desc([count], [4]), c=b.x(0), flags={"bc_src": 1}, loc=loc)
    elif kind in ("gather", "atomic"):
        b.emit("iota", "i64", a=b.x(0), b=0, n=count)
        b.emit("const", "i64", a=b.x(512), b=b.const(4), n=1)
        b.emit("mul", "i64", a=b.x(0), b=b.x(0), c=b.x(512), n=count, flags={"bc2": 1})
        b.emit("add", "i64", a=b.x(0), b=b.x(0), c=b.s(0), n=count, flags={"bc2": 1})
        if kind == "gather":
            b.emit("gather", "f32", a=b.x(1024), b=b.x(0), n=count, loc=loc)
        else:
            b.emit("const", "f32", a=b.x(1024), b=b.const(const_bits("f32", 1.0)), n=1)
            b.emit("atom", "f32", a=b.x(2048), b=b.x(0), c=b.x(1024), n=count, flags={"bc_val": 1, "op": "fadd"},
                   loc=loc)
    return b.build()


@pytest.mark.parametrize("kind", ["load", "store", "gather", "atomic"])
@pytest.mark.parametrize("threads", [1, 2])
def test_out_of_bounds(kind, threads):
    x = DevBuf(64)  # 16 f32
    x.view(np.float32)[:] = 5
    k = oob_kernel(kind)
    with pytest.raises(rt.DeviceError) as ei:
        k.launch(0, 3, 1, 1, (x,), num_threads=threads)
    e = ei.value
    assert isinstance(e, RuntimeError) and not isinstance(e, rt.DeviceAssertionError)
    assert e.kernel == "oob_" + kind and e.file == "/src/kern.py" and e.line == 42
    assert e.address == x.addr + 64 and e.size == 4 and e.allocation == (x.addr, 64)
    assert e.pid[1:] == (0, 0) and 0 <= e.pid[0] < 3
    msg = str(e)
    for part in [f"out-of-bounds {kind if kind != 'atomic' else 'atomic'}", f"0x{x.addr + 64:x}", "4 bytes",
                 "0 bytes after the end of the nearest allocation", f"0x{x.addr:x} of 64 bytes",
                 "/src/kern.py:42:     y = tl.load(x_ptr + offs)", "oob_" + kind]:
        assert part in msg, (part, msg)
    if kind == "store":  # nothing was written by the faulting instruction
        assert (x.view(np.float32) == 5).all()
    # the device keeps working
    ok = oob_kernel(kind, count=16)
    ok.launch(0, 2, 1, 1, (x,), num_threads=threads)
    x.free()


def test_out_of_bounds_before_start_and_nearest():
    x = DevBuf(256)
    b = Builder("neg")
    b.arg("x_ptr", "ptr", "f32", b.s(0))
    b.emit("ld", "f32", a=b.x(0), b=b.s(0), c=b.desc([4], [-64]))
    with pytest.raises(rt.DeviceError, match=r"out-of-bounds load of 4 bytes .*64 bytes before the start") as ei:
        b.build().launch(0, 1, 1, 1, (x,))
    assert ei.value.address == x.addr - 64 and ei.value.file is None
    assert "<no source location> (instruction 0, ld)" in str(ei.value)
    x.free()


def test_misaligned_atomic_and_fault_pid():
    x = DevBuf(64)
    b = Builder("mis")
    b.arg("x_ptr", "ptr", "i32", b.s(0))
    b.emit("pid", a=b.s(1), b=0)
    b.emit("const", "i32", a=b.s(2), b=b.const(13), n=1)
    b.emit("cmpi", "i32", a=b.s(3), b=b.s(1), c=b.s(2), n=1, flags={"pred": "ne"})
    b.emit("brnz", "i1", a=b.s(3), b=6)
    b.emit("const", "i64", a=b.s(4), b=b.const(2), n=1)  # only program 13 misaligns its address
    b.emit("add", "i64", a=b.s(0), b=b.s(0), c=b.s(4), n=1)
    b.emit("atom", "i32", b=b.s(0), c=b.s(2), n=1, flags={"op": "add"})
    with pytest.raises(rt.DeviceError, match="misaligned atomic of 4 bytes") as ei:
        b.build().launch(0, 40, 1, 1, (x,), num_threads=3)
    assert ei.value.pid == (13, 0, 0) and ei.value.address == x.addr + 2
    x.free()


def test_device_assert():
    b = Builder("asrt")
    loc = b.loc("/src/k.py", 7, "    tl.device_assert(x < 3, 'x too big')")
    b.emit("iota", "i32", a=b.x(0), b=0, n=8)
    b.emit("const", "i32", a=b.x(64), b=b.const(3), n=1)
    b.emit("cmpi", "i32", a=b.x(128), b=b.x(0), c=b.x(64), n=8, flags={"pred": "slt", "bc2": 1})
    b.emit("assert", a=b.x(128), b=b.string("x too big"), n=3, loc=loc)  # first 3 pass
    b.emit("assert", a=b.x(128), b=b.string("x too big"), n=8, loc=loc)
    k = b.build()
    with pytest.raises(rt.DeviceAssertionError) as ei:
        k.launch(0, 1, 1, 1, ())
    e = ei.value
    assert isinstance(e, rt.DeviceError)
    assert e.message == "x too big" and e.file == "/src/k.py" and e.line == 7 and e.pid == (0, 0, 0)
    assert "/src/k.py:7: device-side assertion failed in kernel 'asrt'" in str(e) and "element 3" in str(e)


# ---------------------------------------------------------------------------------------------
# launch arguments
# ---------------------------------------------------------------------------------------------
def test_launch_argument_errors():
    b = Builder("argk")
    b.arg("x_ptr", "ptr", "f32", b.s(0))
    b.arg("n", "int", "i32", b.s(1))
    b.emit("halt")
    k = b.build()
    host = np.zeros(16, np.float32)
    with pytest.raises(rt.DeviceError, match="argument 'x_ptr' is not in spyre:0 memory") as ei:
        k.launch(0, 1, 1, 1, (host.ctypes.data, 3))
    assert ei.value.arg == "x_ptr" and ei.value.address == host.ctypes.data

    class T:
        def data_ptr(self):
            return host.ctypes.data
    with pytest.raises(rt.DeviceError, match="x_ptr"):
        k.launch(0, 1, 1, 1, (T(), 3))
    k.launch(0, 1, 1, 1, (0, 3))  # null pointers are allowed
    k.launch(0, 1, 1, 1, (None, 3))
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        k.launch(0, 1, 1, 1, (None,))
    with pytest.raises(TypeError, match="must be an integer"):
        k.launch(0, 1, 1, 1, (None, 1.5))
    with pytest.raises(TypeError, match="must be a tensor"):
        k.launch(0, 1, 1, 1, ("x", 1))
    with pytest.raises(ValueError, match="invalid spyre device"):
        k.launch(99, 1, 1, 1, (None, 1))
    with pytest.raises(ValueError, match="bad grid"):
        k.launch(0, -1, 1, 1, (None, 1))
    k.launch(0, 0, 1, 1, (None, 1))  # an empty grid runs nothing
    # a pointer into the middle of an allocation, or one past its end, is fine
    d = DevBuf(64)
    k.launch(0, 1, 1, 1, (d.addr + 64, 1))
    d.free()


# ---------------------------------------------------------------------------------------------
# bad binaries
# ---------------------------------------------------------------------------------------------
def good_builder():
    b = Builder("good", n_sregs=4, lx_bytes=256)
    b.arg("p", "ptr", "f32", b.s(0))
    b.emit("const", "f32", a=b.x(0), b=b.const(0), n=4)
    b.emit("st", "f32", a=b.s(0), b=b.desc([4], [4]), c=b.x(0))
    b.string("s")
    return b


def patch_insn(raw: bytes, i: int, **fields) -> bytes:
    off = struct.unpack_from("<I", raw, 12)[0] + 32 * i
    vals = list(isa.INSN_STRUCT.unpack_from(raw, off))
    names = ["op", "t", "t2", "flags", "a", "b", "c", "d", "e", "n"]
    for k, v in fields.items():
        vals[names.index(k)] = v
    return raw[:off] + isa.INSN_STRUCT.pack(*vals) + raw[off + 32:]


def with_meta(raw: bytes, **changes) -> bytes:
    from asm_helpers import Program
    p = Program.decode(raw)
    for k, v in changes.items():
        setattr(p, k, v)
    return p.encode()


def test_bad_binaries():
    good = good_builder().binary()
    rt.Kernel(good)
    cases = [
        (b"", "too short"),
        (b"XXXX" + good[4:], "bad magic"),
        (good[:4] + struct.pack("<I", 99) + good[8:], "ISA version 99"),
        (good[:60], "runs past the end"),
        (patch_insn(good, 0, op=200), "unknown opcode 200"),
        (patch_insn(good, 0, t=77), "unknown dtype code 77"),
        (patch_insn(good, 0, a=10 ** 6), "operand dst at arena offset 1000000"),
        (patch_insn(good, 0, n=1000), "outside the arena"),
        (patch_insn(good, 0, b=5), "constant index 5 out of range"),
        (patch_insn(good, 1, b=9), "descriptor index 9 out of range"),
        (patch_insn(good, 1, a=4000), "operand base"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["jmp"].code, a=3), "label 3 is outside the program"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["print"].code, a=4), "string index 4 out of range"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["add"].code, t=9, b=0, c=0), "not supported for dtype f8e4m3fn"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["cvt"].code, flags=15 << 8, b=0), "unknown conversion mode 15"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["red"].code, flags=14 << 8), "reduction 14 not supported"),
        (patch_insn(good, 0, op=isa.OPCODE_BY_NAME["pid"].code, b=3), "grid axis 3"),
        (with_meta(good, n_sregs=10 ** 6), "'n_sregs' = 1000000 is not in"),
        (with_meta(good, lx_bytes=3 << 20), "'lx_bytes'"),
    ]
    meta_off = struct.unpack_from("<I", good, 12 + 8 * 4)[0]
    cases.append((good[:meta_off] + b"{not json".ljust(len(good) - meta_off), "not valid JSON"))
    from asm_helpers import ArgSpec
    cases.append((with_meta(good, args=[ArgSpec("p", "ptr", "f32", 10 ** 5)]), "slot 100000 is outside the arena"))
    cases.append((with_meta(good, args=[ArgSpec("p", "weird", "f32", 0)]), "unknown kind 'weird'"))
    cases.append((with_meta(good, args=[ArgSpec("n", "int", "f32", 0)]), "int argument of dtype 'f32'"))
    locs_off = struct.unpack_from("<I", good, 12 + 8 * 3)[0]
    cases.append((good[:locs_off] + struct.pack("<i", 5) + good[locs_off + 4:], "location index 5 out of range"))
    d = good_builder()
    d.p.descs[0] = isa.Descriptor((4,), (("s", 9999),))
    cases.append((d.binary(), "stride register at arena offset 9999"))
    for raw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            rt.Kernel(raw)


def _bounded(b, shape=(4,), strides=(4,)):
    """A descriptor bounded by register s0 in its first dimension."""
    b.p.descs.append(isa.Descriptor(tuple(shape), tuple(strides), (("s", b.s(0)),)))
    return len(b.p.descs) - 1


def _with_vector(b):
    """A 4-element descriptor whose dimension steps through an offset vector at x512."""
    b.p.descs.append(isa.Descriptor((4,), (("v", b.x(512)),)))
    return len(b.p.descs) - 1


# Each rule the decoder applies beyond the operand table's extents (runtime/interp.c decode_rules and
# the elementwise loop choice), with the instruction that breaks it.
DECODE_RULES = {
    "bmask makes an i1 tile": lambda b: b.emit("bmask", "f32", a=b.x(0), c=_bounded(b)),
    "bmask takes no offset vectors": lambda b: b.emit("bmask", "i1", a=b.x(0), c=_with_vector(b)),
    "bsel takes no offset vectors": lambda b: b.emit("bsel", "f32", a=b.x(0), b=_with_vector(b), c=b.x(64),
                                                     d=b.x(128), n=4),
    "n is 8 but the descriptor has 4 elements": lambda b: b.emit("bsel", "f32", a=b.x(0), b=_bounded(b), c=b.x(64),
                                                                 d=b.x(128), n=8),
    "tcopy descriptors take no bounds": lambda b: b.emit("tcopy", "f32", a=b.x(0), b=b.x(64), c=_bounded(b)),
    "tcopy descriptors take no offset vectors": lambda b: b.emit("tcopy", "f32", a=b.x(0), b=b.x(64),
                                                                 c=_with_vector(b)),
    "ld.f32): a descriptor with bounds takes no mask operand": lambda b: b.emit(
        "ld", "f32", a=b.x(0), b=b.s(1), c=_bounded(b), d=b.x(64)),
    "st.f32): a descriptor with bounds takes no mask operand": lambda b: b.emit(
        "st", "f32", a=b.s(1), b=_bounded(b), c=b.x(0), d=b.x(64)),
    "iota needs an integer dtype": lambda b: b.emit("iota", "f32", a=b.x(0), b=0, n=4),
    "branch condition must be an integer or float scalar": lambda b: b.emit("brz", "f8e4m3fn", a=b.s(0), b=0),
    "atomic_cas needs an integer or float dtype": lambda b: b.emit("acas", "f8e4m3fn", a=b.x(0), b=b.x(64),
                                                                   c=b.x(128), d=b.x(192), n=1),
    "atomic op 0 not supported for dtype f8e4m3fn": lambda b: b.emit("atom", "f8e4m3fn", a=b.x(0), b=b.x(64),
                                                                     c=b.x(128), n=1, flags={"op": "add"}),
    "unknown math1 function 200": lambda b: b.emit("math1", "f32", a=b.x(0), b=b.x(64), n=4, flags={"fn": 200}),
    "unknown math2 function 100": lambda b: b.emit("math2", "f32", a=b.x(0), b=b.x(64), c=b.x(128), n=4,
                                                   flags={"fn": 100}),
    "a batched dot takes no view register operands": lambda b: b.emit(
        "dot", "f32", "f32", a=b.x(0), b=0, c=b.x(256), e=2 << 16 | 2, n=2, flags={"batch": 2, "vb": 1}),
    "base argument 1 is not a pointer argument": lambda b: b.emit("ld", "f32", a=b.x(0), b=b.s(1),
                                                                  c=b.desc([4], [4]), flags={"arg": 1}),
}


@pytest.mark.parametrize("message", list(DECODE_RULES))
def test_decode_rules(message):
    """Loading refuses an instruction that breaks a rule of its kind, naming the instruction and the rule."""
    b = Builder()
    DECODE_RULES[message](b)
    with pytest.raises(ValueError, match=r"instruction 0 \(.*" + re.escape(message)):
        b.build()


# ---------------------------------------------------------------------------------------------
# Ctrl-C
# ---------------------------------------------------------------------------------------------
def spin_kernel():
    b = Builder("spin_forever")
    b.emit("nop")
    b.emit("jmp", a=0)
    return b.build()


@pytest.mark.parametrize("grid,threads", [((1, 1, 1), 0), ((8, 1, 1), 1), ((8, 1, 1), 4)])
def test_ctrl_c_interrupts_infinite_loop(grid, threads):
    k = spin_kernel()
    # A background job of a non-interactive shell starts with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: install Python's own for the test, or the kernel would spin on unasked.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            k.launch(0, *grid, (), num_threads=threads)
        elapsed = time.monotonic() - t0
        timer.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert elapsed < 1.2, elapsed
    # cores stopped and the device works
    c = DevBuf(4)
    c.view(np.int32)[0] = 0
    counter_kernel(5).launch(0, 8, 1, 1, (c,), num_threads=4)
    assert c.view(np.int32)[0] == 40
    c.free()


@pytest.mark.parametrize("env,build", [("SPYRE_NO_AVX2", "baseline"), ("SPYRE_NO_AVX512", "avx2")])
def test_narrower_kernel_builds(env, build):
    """The typed loops exist three times (baseline, AVX2/F16C and AVX-512 builds); run the elementwise,
    conversion and dot tests again in a process that is refused the wider builds (SPYRE_NO_AVX2=1: the
    baseline; SPYRE_NO_AVX512=1: at most AVX2)."""
    import subprocess
    if build == "avx2" and rt.simd() != "avx512":
        pytest.skip("the host has no AVX-512: the default run is already the AVX2 build or the baseline")
    env = {**{k: v for k, v in os.environ.items() if k not in ("SPYRE_NO_AVX2", "SPYRE_NO_AVX512")}, env: "1"}
    sel = "binary or cmpi or cmpf or select or fma or clamp or int_unary or cvt_f16 or cvt_int or red_float or dot_f32"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__, "-k", sel],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-c", "from spyre_triton import _runtime; print(_runtime.simd())"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == (build if rt.simd() != "baseline" else "baseline")
    assert rt.simd() in ("avx512", "avx2", "baseline")


def test_concurrent_launches_from_python_threads():
    """Launches on one device from several Python threads are serialised, each one complete."""
    k = counter_kernel(300)
    c = DevBuf(4)
    c.view(np.int32)[0] = 0
    errors = []

    def work():
        try:
            for _ in range(5):
                k.launch(0, 6, 1, 1, (c,), num_threads=2)
        except Exception as e:  # pragma: no cover
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and c.view(np.int32)[0] == 4 * 5 * 6 * 300
    c.free()


def test_kernel_init_twice_is_refused():
    b = good_builder()
    k = rt.Kernel(b.binary())
    with pytest.raises(TypeError, match="already initialised"):
        k.__init__(b.binary())
    assert k.name == "good"


def test_overlapping_operands():
    """In place is fine; a result over a source it only partly coincides with (widening in place,
    shifted ranges) still sees every input as it was before the instruction."""
    src = np.arange(16, dtype=np.float16)

    def build(b, xo):
        b.emit("ld", "f16", a=xo, b=b.s(1), c=b.desc([16], [2]))
        b.emit("cvt", "f32", "f16", a=xo, b=xo, n=16, flags={"mode": "fpext"})  # widen in place
        b.emit("const", "i32", a=b.x(0), b=b.const(1), n=20)
        b.emit("iota", "i32", a=b.x(0), b=0, n=20)
        b.emit("add", "i32", a=b.x(4), b=b.x(0), c=b.x(0), n=19)  # dst one element ahead of both sources
        b.emit("tcopy", "i32", a=xo + 64, b=b.x(0), c=b.desc([20], [1]))
        b.emit("add", "i32", a=xo + 144, b=xo + 64, c=xo + 64, n=1)
    buf = DevBuf.of(src)
    r = run_lx(build, "i32", 37, args=(buf,))
    buf.free()
    assert (r[:16].view(np.float32) == np.arange(16)).all()
    assert list(r[16:36]) == [0] + [2 * i for i in range(19)]


def test_dot_result_over_its_input():
    A = RNG.standard_normal((8, 8)).astype(np.float32)
    B = RNG.standard_normal((8, 8)).astype(np.float32)
    ba, bb = DevBuf.of(A), DevBuf.of(B)

    def build(b, xo):
        b.emit("ld", "f32", a=xo, b=b.s(1), c=b.desc([64], [4]))
        b.emit("ld", "f32", a=b.x(0), b=b.s(2), c=b.desc([64], [4]))
        b.emit("dot", "f32", "f32", a=xo, b=xo, c=b.x(0), d=xo, e=8 << 16 | 8, n=8)  # a = a @ b + a
    r = run_lx(build, "f32", 64, args=(ba, bb)).view(np.float32).reshape(8, 8)
    np.testing.assert_allclose(r, A @ B + A, rtol=1e-5, atol=1e-5)
    ba.free()
    bb.free()


def test_tcopy_and_red_overlapping():
    def build(b, xo):
        b.emit("iota", "i32", a=xo, b=0, n=12)
        b.emit("tcopy", "i32", a=xo, b=xo, c=b.desc([4, 3], [1, 4]))  # transpose [3, 4] in place
        b.emit("iota", "i32", a=xo + 64, b=0, n=12)
        b.emit("red", "i32", a=xo + 68, b=xo + 64, c=3, d=4, e=1, flags={"op": "add"})  # shifted by one
    r = run_lx(build, "i32", 20)
    assert list(r[:12]) == list(np.arange(12).reshape(3, 4).T.reshape(-1))
    assert list(r[17:20]) == [6, 22, 38]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_pool_after_fork():
    """A forked child has no worker threads: its pool starts afresh."""
    k = counter_kernel(10)
    c = DevBuf(4)
    c.view(np.int32)[0] = 0
    k.launch(0, 8, 1, 1, (c,), num_threads=3)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            c.view(np.int32)[0] = 0
            k.launch(0, 8, 1, 1, (c,), num_threads=3)
            os._exit(0 if c.view(np.int32)[0] == 80 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    k.launch(0, 8, 1, 1, (c,), num_threads=3)
    assert c.view(np.int32)[0] == 160
    c.free()
